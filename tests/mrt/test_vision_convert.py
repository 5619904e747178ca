"""MRT end to end with the opset-2 vision ops: a tiny conv net with a nearest upsample-by-2 Resize, a
bilinear Resize and a ConvTranspose, converted with mrt.convert, run on the reference and numba backends
bit for bit, and close to onnxruntime's float output."""
import numpy as np
import pytest
from onnx import helper

import mrt.pipeline as pipeline
from conftest import build_model, ort_run
from cvm.ops import OPSET_V1

N = helper.make_node


def _tiny_net(rng, wide_ct: bool = False):
    f = lambda *s: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32)  # noqa: E731
    c_ct = 64 if wide_ct else 6
    nodes = [
        N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
        N("Resize", ["r1", "", "s2"], ["u1"], mode="nearest"),  # upsample by 2 (half_pixel, round_prefer_floor)
        N("Conv", ["u1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]), N("Relu", ["c2"], ["r2"]),
        N("Resize", ["r2", "", "", "sz"], ["u2"], mode="linear", axes=[2, 3]),  # bilinear to 11 x 13 (half_pixel)
        N("Conv", ["u2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1]), N("Relu", ["c3"], ["r3"]),
        N("ConvTranspose", ["r3", "w4", "b4"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 0]),
    ]
    inits = {"w1": f(6, 3, 3, 3), "b1": f(6) * 0.1, "s2": np.array([1, 1, 2, 2], np.float32),
             "w2": f(8, 6, 3, 3), "b2": f(8) * 0.1, "sz": np.array([11, 13], np.int64),
             "w3": f(c_ct, 8, 3, 3), "b3": f(c_ct) * 0.1, "w4": f(c_ct, 4, 4, 4) * 4, "b4": f(4) * 0.1}
    return build_model(nodes, {"x": (3, 8, 10)}, ["y"], inits, opset=18)


def _cosine(a, b):
    a, b = a.reshape(len(a), -1).astype(np.float64), b.reshape(len(b), -1).astype(np.float64)
    return float(np.mean(np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))))


@pytest.mark.parametrize("wide_ct", [False, True])
def test_tiny_vision_net_converts_and_runs_on_both_backends(wide_ct):
    rng = np.random.default_rng(3)
    model = _tiny_net(rng, wide_ct)
    calib = rng.standard_normal((64, 3, 8, 10)).astype(np.float32)
    kw = {"acc_bits": 20} if wide_ct else {}  # a narrow budget: the conv_transpose2d is split along channels
    cm = pipeline.convert(model, calib, progress=False, calibration_method="absmax", **kw)
    ops = [n.op for n in cm.graph.nodes]
    assert cm.graph.opset == 2 and {"resize2d", "conv_transpose2d"} <= set(ops)
    assert "resize2d" not in OPSET_V1
    if wide_ct:
        assert ops.count("conv_transpose2d") > 1  # split, and the partial outputs added
    x = rng.standard_normal((16, 3, 8, 10)).astype(np.float32)
    xq = _quantize_input(cm, x)
    ref = cm.run(xq, backend="reference")
    fast = cm.run(xq, backend="numba")
    assert ref.dtype == fast.dtype and np.array_equal(ref, fast)
    out_scale = next(iter(cm.meta["output_scales"].values()))
    want = ort_run(model, {"x": x})["y"]
    assert ref.shape == want.shape == (16, 4, 23, 26)
    assert _cosine(ref * out_scale, want) > 0.99


def _quantize_input(cm, x):
    (name, scale), = cm.meta["input_scales"].items()
    spec = cm.inputs[0]
    m = 2 ** (spec.bits - 1) - 1
    return np.clip(np.round(x / scale), -m, m).astype(spec.dtype)
