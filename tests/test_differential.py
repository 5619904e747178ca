"""numba backend vs the reference interpreter, bit for bit: the whole conformance suite under
NUMBA_NUM_THREADS=1 and =2 and NUMBA_DISABLE_JIT=1 (in subprocesses, since numba reads these at
import), every sample alone against its row of the batched run, and models whose inputs and
parameters sit at their extremes."""
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import cvm
from cvm.conformance import DEFAULT_DIR, read_manifest
from cvm.arith import bits_max
from cvm.values import storage_dtype

pytest.importorskip("numba")
if importlib.util.find_spec("cvm.interp.numba") is None:
    pytest.skip("the numba backend (cvm/interp/numba.py) is not there yet", allow_module_level=True)

SUITE = DEFAULT_DIR
CASES = read_manifest(SUITE)["cases"]
IDS = [c["name"] for c in CASES]
I32 = 2 ** 31 - 1
NOJIT_GAS = 200_000  # with the JIT off the kernels run as Python loops: only cases up to this gas per batch


@pytest.mark.parametrize("env", [{"NUMBA_NUM_THREADS": "1"}, {"NUMBA_NUM_THREADS": "2"}, {"NUMBA_DISABLE_JIT": "1"}],
                         ids=["threads1", "threads2", "nojit"])
def test_suite_passes_with_numba(env, tmp_path):
    cases = CASES
    if "NUMBA_DISABLE_JIT" in env:
        cases = [c for c in CASES if c["gas"] * c["input_shape"][0] <= NOJIT_GAS]
        assert len(cases) >= 50
    select = [arg for c in cases for arg in ("-k", c["name"])] if cases is not CASES else []
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, "-m", "cvm.cli", "conformance", str(SUITE), "--backend", "numba",
                           "--json", str(out), *select], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    r = json.loads(out.read_text())
    assert r["cases"] == len(cases) == r["passed"] and r["failed"] == []


def _outputs(y) -> list[np.ndarray]:
    return list(y.values()) if isinstance(y, dict) else [y]


@pytest.mark.parametrize("backend", ["reference", "numba"])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_each_sample_alone_equals_its_batched_row(case, backend):
    model = cvm.load(SUITE / case["model"])
    x = np.load(SUITE / case["input"])
    batched = _outputs(model.run(x, backend=backend))
    for i in range(x.shape[0]):
        alone = _outputs(model.run(x[i:i + 1], backend=backend))
        for a, b in zip(alone, batched):
            assert a.dtype == b.dtype and np.array_equal(a, b[i:i + 1]), f"sample {i}"


# ---------------------------------------------------------------- extremes

def _extreme_batch(shape, bits, seed):
    m = bits_max(bits)
    rng = np.random.default_rng(seed)
    alt = np.where(np.arange(int(np.prod(shape))) % 2 == 0, m, -m).reshape(shape)
    rows = [np.full(shape, m), np.full(shape, -m), alt, -alt, np.zeros(shape, np.int64),
            rng.integers(-m, m + 1, shape), rng.choice([-m, -1, 0, 1, m], shape)]
    return np.stack(rows).astype(storage_dtype(bits))


def _requant(in_bits, m, shift, bits, axis=0, shape=(3, 4)):
    b = cvm.GraphBuilder()
    x = b.input("x", shape, in_bits)
    return b.build(b.op("requant", x, b.const(m, dtype="int32"), shift=shift, bits=bits, axis=axis)), shape, in_bits


def _dense(in_bits, w, wdtype, bias=None):
    b = cvm.GraphBuilder()
    w = np.asarray(w)
    x = b.input("x", (w.shape[1],), in_bits)
    ins = [x, b.const(w, dtype=wdtype)] + ([b.const(bias, dtype="int32")] if bias is not None else [])
    return b.build(b.op("dense", *ins)), (w.shape[1],), in_bits


def _conv(in_bits, w, wdtype, **attrs):
    b = cvm.GraphBuilder()
    w = np.asarray(w)
    shape = (w.shape[1] * attrs.get("groups", 1), 7, 6)
    x = b.input("x", shape, in_bits)
    return b.build(b.op("conv2d", x, b.const(w, dtype=wdtype), **attrs)), shape, in_bits


def _chain(in_bits):
    """conv -> requant -> relu -> max_pool -> lut -> div -> dense -> requant to 32 bits."""
    rng = np.random.default_rng(in_bits)
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 6, 6), in_bits)
    h = b.op("conv2d", x, b.const(np.full((3, 2, 3, 3), 127), dtype="int8"), pads=(1, 1, 1, 1), strides=(1, 2))
    h = b.op("requant", h, b.const([1, 255, 65535], dtype="int32"), shift=in_bits + 8, bits=8, axis=0)
    h = b.op("relu", h)
    h = b.op("max_pool2d", h, kernel=(2, 2), pads=(1, 0, 0, 1))
    h = b.op("lut", h, b.const(rng.integers(-2 ** 24, 2 ** 24, 128), dtype="int32"), offset=0)
    h = b.op("div", h, b.const([7], dtype="int8"))
    h = b.op("dense", b.op("flatten", h), b.const(np.full((2, 54), 3), dtype="int8"))
    h = b.op("requant", h, b.const([I32], dtype="int32"), shift=40, bits=32)
    return b.build(h), (2, 6, 6), in_bits


EXTREME_MODELS = {
    "requant_m_max_shift62": lambda: _requant(32, [I32], 62, 32),
    "requant_m_max_shift31_to_8": lambda: _requant(32, [I32], 31, 8),
    "requant_m0_and_1": lambda: _requant(32, [0, 1, 2, I32], 1, 32, axis=1),
    "requant_shift0_to_1bit": lambda: _requant(16, [65535], 0, 1),
    "requant_shift0_to_2bits": lambda: _requant(16, [3, 1, 0], 0, 2, axis=0),
    "requant_per_channel_odd": lambda: _requant(24, [1, 3, 5, 7], 3, 20, axis=1),
    "dense_int32_weights_2bit_input": lambda: _dense(2, [[I32], [-I32]], "int32"),
    "dense_int16_weights_at_int32": lambda: _dense(16, [[32767, 32767], [-32767, -32767]], "int16", [131069, -131069]),
    "dense_k4096_int8_max": lambda: _dense(8, np.full((2, 4096), 127) * np.array([[1], [-1]]), "int8"),
    "conv_int16_at_int32": lambda: _conv(16, np.full((2, 2, 1, 1), 32767) * np.array([1, -1])[:, None, None, None],
                                         "int16"),
    "conv_groups_dilated": lambda: _conv(8, np.full((4, 1, 3, 2), -127), "int8", groups=2, dilations=(2, 1),
                                         pads=(2, 0, 1, 3), strides=(2, 1)),
    "chain_8bit": lambda: _chain(8),
    "chain_12bit": lambda: _chain(12),
}


@pytest.mark.parametrize("name", sorted(EXTREME_MODELS))
def test_numba_equals_reference_at_extremes(name):
    model, shape, bits = EXTREME_MODELS[name]()
    x = _extreme_batch(shape, bits, seed=len(name))
    want = _outputs(model.run(x, backend="reference"))
    got = _outputs(model.run(x, backend="numba"))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w), f"first difference at {np.argwhere(g != w)[0].tolist()}"
    assert cvm.output_hash(got) == cvm.output_hash(want)
