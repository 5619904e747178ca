"""The models `cvm bench` times: a fixture (fixtures/models/NAME.cvm with its ONNX source and data),
a .cvm path (its ONNX source: NAME.onnx beside it or `onnx=`; float inputs and calibration data:
fixtures/data/NAME_test.npz / NAME_calib.npz, or one `data=` npz for both), or one of the hand-built integer models `lenet_int8` / `resnet_int8` (random int8
weights, the architectures of the mnist_cnn / resnet_cifar fixtures)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SYNTHETIC = {"lenet_int8": "mnist_cnn", "resnet_int8": "resnet_cifar"}  # hand-built -> onnx of that architecture
DEFAULT_MODELS = ("resnet_cifar", "mnist_cnn")  # what `cvm bench` times when no MODEL is named



class BenchModel:
    """A CVM model with integer inputs, and (when there is one) the float ONNX model it came from with
    float inputs and calibration data."""

    def __init__(self, name, model, int_inputs, onnx_path=None, float_inputs=None, calib=None):
        self.name, self.model, self.int_inputs = name, model, int_inputs
        self.onnx_path, self.float_inputs, self.calib = onnx_path, float_inputs, calib

    def batch(self, arr: np.ndarray, n: int) -> np.ndarray:
        return np.resize(arr, (n,) + arr.shape[1:])


def _npz_inputs(path: Path) -> np.ndarray | None:
    if not path.exists():
        return None
    with np.load(path) as f:
        return np.asarray(f["x"] if "x" in f else f[f.files[0]], np.float32)


def load_bench_model(name: str, data: str | Path | None = None, onnx: str | Path | None = None) -> BenchModel:
    import cvm
    if name in SYNTHETIC:
        model = lenet_int8() if name == "lenet_int8" else resnet_int8()
        spec = model.inputs[0]
        x = np.random.default_rng(0).integers(-127, 128, (256,) + spec.shape[1:]).astype(np.int8)
        onnx_name = SYNTHETIC[name]
        onnx = FIXTURES / "models" / f"{onnx_name}.onnx"
        return BenchModel(name, model, x, onnx if onnx.exists() else None,
                          _npz_inputs(FIXTURES / "data" / f"{onnx_name}_test.npz"),
                          _npz_inputs(FIXTURES / "data" / f"{onnx_name}_calib.npz"))
    path = Path(name)
    if path.suffix != ".cvm":
        path = FIXTURES / "models" / f"{name}.cvm"
    model = cvm.load(path)
    stem = path.stem
    if data is not None:
        floats = calib = _npz_inputs(Path(data))
        if floats is None:
            raise FileNotFoundError(f"no data file {data}")
    else:
        floats = _npz_inputs(FIXTURES / "data" / f"{stem}_test.npz")
        calib = _npz_inputs(FIXTURES / "data" / f"{stem}_calib.npz")
    if floats is not None and model.inputs[0].scale is not None:
        ints = model.quantize_input(floats)
    else:
        spec = model.inputs[0]
        m = (1 << (spec.bits - 1)) - 1
        ints = np.random.default_rng(0).integers(-m, m + 1, (256,) + spec.shape[1:]).astype(spec.dtype)
    onnx = Path(onnx) if onnx is not None else path.with_suffix(".onnx")
    return BenchModel(stem, model, ints, onnx if onnx.exists() else None, floats, calib)


def _requant_to_int8(b, y: str, channels: int, acc_bits: int) -> str:
    """Per-channel multiplier in [2^14, 2^15) and the shift that brings about acc_bits bits to 8."""
    m = np.random.default_rng(channels + acc_bits).integers(1 << 14, 1 << 15, channels)
    return b.op("requant", y, b.const(m), shift=acc_bits + 15 - 8, bits=8, axis=0)


def _conv(b, x, cin, cout, k=3, stride=1, relu=True, rng=None):
    w = rng.integers(-127, 128, (cout, cin, k, k))
    y = b.op("conv2d", x, b.const(w), b.const(rng.integers(-1000, 1000, cout)), pads=(k // 2,) * 4,
             strides=(stride, stride))
    acc = 7 + 7 + (cin * k * k).bit_length() - 3  # typical magnitude, not the worst case
    y = _requant_to_int8(b, y, cout, acc)
    return b.op("relu", y) if relu else y


def lenet_int8():
    """The mnist_cnn architecture with random int8 weights: conv 1->8, maxpool, conv 8->16, 2x2 sum
    pool, dense 784->64, dense 64->10."""
    import cvm
    rng, b = np.random.default_rng(1), cvm.GraphBuilder()
    x = b.input("x", (1, 28, 28), 8)
    y = b.op("max_pool2d", _conv(b, x, 1, 8, rng=rng), kernel=(2, 2), strides=(2, 2))
    y = _conv(b, y, 8, 16, rng=rng)
    y = b.op("conv2d", y, b.const(np.ones((16, 1, 2, 2), np.int64)), strides=(2, 2), groups=16)
    y = b.op("requant", b.op("flatten", y), b.const([1]), shift=2, bits=8)
    y = b.op("dense", y, b.const(rng.integers(-127, 128, (64, 784))), b.const(rng.integers(-999, 999, 64)))
    y = b.op("relu", _requant_to_int8(b, y, 64, 17))
    y = b.op("dense", y, b.const(rng.integers(-127, 128, (10, 64))), b.const(rng.integers(-999, 999, 10)))
    return b.build(y)


def resnet_int8():
    """The resnet_cifar architecture with random int8 weights: stem conv 3->32, BasicBlocks of widths
    32/64/128 (1/1/2 blocks, stride-2 1x1-conv shortcuts, residual adds), global sum pool, dense."""
    import cvm
    rng, b = np.random.default_rng(2), cvm.GraphBuilder()
    y = _conv(b, b.input("x", (3, 32, 32), 8), 3, 32, rng=rng)
    cin = 32
    for width, stride in ((32, 1), (64, 2), (128, 2), (128, 1)):
        z = _conv(b, y, cin, width, stride=stride, rng=rng)
        z = _conv(b, z, width, width, relu=False, rng=rng)
        short = y if stride == 1 and cin == width else _conv(b, y, cin, width, k=1, stride=stride, relu=False, rng=rng)
        y = b.op("relu", b.op("requant", b.op("add", z, short), b.const([1]), shift=1, bits=8))
        cin = width
    y = b.op("sum", y, axes=(1, 2), keepdims=0)
    y = b.op("requant", y, b.const([1]), shift=6, bits=8)
    y = b.op("dense", y, b.const(rng.integers(-127, 128, (10, 128))), b.const(rng.integers(-999, 999, 10)))
    return b.build(y)
