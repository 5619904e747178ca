"""The whole-plan runner (cvm.interp.numba_kernels.wholeplan: a bound set's kernel calls run as one
compiled program over one byte arena) equals the reference interpreter bit for bit: on unrolled
recurrent cells (LSTM- and GRU-like: slices, dense, requant, luts, gate products, sub from a
constant, concat of the time steps) and on every op family and small model of the equivalence
suite, on every ISA this machine runs, at batch 1 and larger, a second run on the same buffers, and
split between threads. The recurrent cells and the fixtures run entirely inside one compiled call.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000, as CI runs)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import wholeplan_gen, wholeplan_ops
from cvm.interp.numba_kernels.calls import Ufunc, call
from numba_helpers import EXAMPLES, ISAS, SETTINGS, assert_same
from strategies import FAMILIES, chain_case, finish, op_case, values

ROOT = Path(__file__).resolve().parents[2]


def check_whole(case, threads: int = 1, split: str = "auto", one_call: bool = False) -> None:
    """Whole-plan runs equal the reference on every ISA (twice: the arena is reused); one_call: the
    run is one compiled call (every kernel inside the program)."""
    graph, analysis = case.model.graph, case.model.analysis
    want = reference.run(graph, analysis, case.inputs)
    batch = next(iter(case.inputs.values())).shape[0]
    for isa in ISAS:
        runner = nb.prepare(graph, analysis, isa=isa, threads=threads, split=split, wholeplan="always")
        assert_same(runner(case.inputs), want, f"[{isa}, whole plan] ")
        assert_same(runner(case.inputs), want, f"[{isa}, whole plan, second run] ")
        if one_call:
            assert runner.wholeplan_segments(batch) == 1, f"[{isa}] not one compiled call"


def _sigmoid_table(draw) -> np.ndarray:
    return values(draw, (255,), 0, 127)


def _tanh_table(draw) -> np.ndarray:
    return values(draw, (255,), -127, 127)


@st.composite
def recurrent_case(draw):
    """An unrolled gated cell over `steps` time steps of a (steps, feat) int8 input: the gates are
    dense(x_t) [+ dense(h)] requantized to int8 and sliced; LSTM: c = i*g [+ f*c], h = o*tanh(c);
    GRU: h = (127 - z)*n [+ z*h]; every h requantized to int8; the output is the h's concatenated."""
    b = cvm.GraphBuilder()
    steps, feat, hid = draw(st.integers(1, 4)), draw(st.integers(1, 6)), draw(st.integers(1, 12))
    lstm = draw(st.booleans())
    gates = 4 if lstm else 3
    x = b.input("x", (steps, feat), 8)
    wx = b.const(values(draw, (gates * hid, feat), -127, 127))
    bias = b.const(values(draw, (gates * hid,), -1000, 1000))
    wh = b.const(values(draw, (gates * hid, hid), -127, 127))

    def requant8(v):
        return b.op("requant", v, b.const([draw(st.integers(1, 99))]), shift=draw(st.integers(3, 12)), bits=8)

    def lut(v, table):
        return b.op("lut", v, b.const(table), offset=-127)
    sig, tanh = _sigmoid_table(draw), _tanh_table(draw)
    h = c = None
    outs = []
    for t in range(steps):
        xt = b.op("slice", x, starts=[t, 0], ends=[t + 1, feat], steps=[1, 1])
        g = b.op("dense", xt, wx, bias)
        if h is not None:
            g = b.op("add", g, b.op("dense", h, wh))
        g = requant8(g)
        p = [b.op("slice", g, starts=[0, k * hid], ends=[1, (k + 1) * hid], steps=[1, 1]) for k in range(gates)]
        if lstm:
            i, f, gg, o = lut(p[0], sig), lut(p[1], sig), lut(p[2], tanh), lut(p[3], sig)
            cn = b.op("mul", i, gg)
            if c is not None:
                cn = b.op("add", cn, b.op("mul", f, c))
            c = requant8(cn)
            h = requant8(b.op("mul", o, lut(c, tanh)))
        else:
            z, n = lut(p[0], sig), lut(p[2], tanh)
            hn = b.op("mul", b.op("sub", b.const(np.array([127])), z), n)
            if h is not None:
                hn = b.op("add", hn, b.op("mul", z, h))
            h = requant8(hn)
        outs.append(h)
    y = b.op("concat", *outs, axis=0) if len(outs) > 1 else outs[0]
    return finish(draw, b, [y])


@SETTINGS
@given(case=recurrent_case())
def test_recurrent_cells_match_reference_in_one_call(case):
    check_whole(case, one_call=True)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(data=st.data())
def test_op_families_match_reference(family, data):
    check_whole(data.draw(op_case(family), label="case"))


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(case=chain_case())
def test_small_models_match_reference(case):
    check_whole(case)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 10))
@given(case=st.one_of(recurrent_case(), chain_case()), threads=st.integers(2, 3),
       split=st.sampled_from(["always", "batch"]))
def test_split_between_threads_matches_reference(case, threads, split):
    check_whole(case, threads=threads, split=split)


@settings(SETTINGS, max_examples=max(1, EXAMPLES // 4))
@given(data=st.data())
def test_binary_kernel_equals_numpy_ufunc(data):
    """wholeplan_ops.binary == np.<ufunc>(a, b, out, dtype=calc, casting="unsafe"), also where the
    calc type wraps (the verifier never lets it, but the kernel must not depend on that)."""
    draw = data.draw
    ufunc = draw(st.sampled_from(list(wholeplan_ops.OPS)))
    out_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    dtypes = [np.int8, np.int16, np.int32, np.int64]
    calc = draw(st.sampled_from(dtypes))
    operands = []
    for _ in range(2):
        r = draw(st.integers(1, len(out_shape)))
        shape = tuple(1 if draw(st.booleans()) else d for d in out_shape[len(out_shape) - r:])
        dt = np.dtype(draw(st.sampled_from([d for d in dtypes if np.dtype(d).itemsize <= np.dtype(calc).itemsize])))
        info = np.iinfo(dt)
        operands.append(values(draw, shape, int(info.min), int(info.max)).astype(dt))
    out_dt = draw(st.sampled_from([d for d in dtypes if np.dtype(d).itemsize <= np.dtype(calc).itemsize]))
    fn = Ufunc(ufunc, calc)
    want = np.empty(out_shape, out_dt)
    fn(*operands, want)
    got = np.empty(out_shape, out_dt)
    [(kernel, args)] = wholeplan_ops.translate(call(fn, *operands, got))
    assert kernel is wholeplan_ops.binary
    kernel(*args)
    np.testing.assert_array_equal(got, want)


def test_steps_are_generated_once_per_kernel_signature(tmp_path, monkeypatch):
    """A step's module is written under a hash of the kernel sources; the same signature gives the
    same compiled step; files of other kernel sources, long unused, are pruned."""
    monkeypatch.setenv("CVM_WHOLEPLAN_DIR", str(tmp_path))
    stale = tmp_path / f"{wholeplan_gen.PREFIX}000000000000_0.py"
    stale.write_text("")
    os.utime(stale, (0, 0))
    kind = ("cvm.interp.numba_kernels.elementwise", "lut", (("int8", 1), ("int16", 1), ("int",), ("int16", 1)))
    wholeplan_gen.step.cache_clear()
    loaded = sys.modules.pop(wholeplan_gen.module_name(kind), None)  # (an earlier test's, elsewhere)
    try:
        f = wholeplan_gen.step(kind)
        assert f is wholeplan_gen.step(kind) and f.address
        files = list(tmp_path.glob(f"{wholeplan_gen.PREFIX}{wholeplan_gen.package_hash()}_*.py"))
        assert len(files) == 1 and not stale.exists()
    finally:
        wholeplan_gen.step.cache_clear()
        if loaded is not None:
            sys.modules[wholeplan_gen.module_name(kind)] = loaded


# compiled calls a run may make: the cells run as one; the OCR BiLSTM's CNN -> sequence transposes are numpy
# copies of strided views, run in Python between two program segments
SEGMENTS = {"rnn_sunspots_lstm": 1, "rnn_digits_gru": 1, "rnn_ocr_bilstm": 3}


@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_recurrent_fixtures_run_in_one_call_and_match_reference(name):
    """Each recurrent fixture, converted from its ONNX with today's defaults, runs as one compiled call (the
    OCR BiLSTM: its layout copies apart) and as the reference does."""
    from mrt.pipeline import convert
    calib = np.load(ROOT / "fixtures/data" / f"{name}_calib.npz")["x"]
    model = convert(ROOT / "fixtures/models" / f"{name}.onnx", calib, progress=False)
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    for batch in (1, 3):
        x = np.random.default_rng(batch).integers(-m, m + 1, (batch,) + tuple(spec.shape[1:])).astype(spec.dtype)
        want = reference.run(model.graph, model.analysis, {spec.name: x})
        for isa in ISAS:
            runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=1)
            assert runner.wholeplan_segments(batch) <= SEGMENTS[name]
            assert_same(runner({spec.name: x}), want, f"[{name} {isa} batch {batch}] ")


def test_whole_plan_sets_stay_within_the_buffer_cache_budget():
    """A whole-plan set counts its arena's bytes (buffers and its copy of the constants) against
    Tuning.max_bound_bytes like any set; one larger than the budget serves its call and is not kept."""
    b = cvm.GraphBuilder()
    x = b.input("x", (256,), bits=8)
    model = b.build(b.op("dense", x, b.const(np.ones((64, 256), np.int64))))
    runner = nb.prepare(model.graph, model.analysis, threads=1, wholeplan="always")
    runner({"x": np.zeros((1, 256), np.int8)})
    one = runner.cached_bytes()
    assert one >= 64 * 256 and runner.wholeplan_segments(1) == 1  # (the weights are in the arena)
    runner = nb.prepare(model.graph, model.analysis, threads=1, wholeplan="always",
                        tuning=nb.Tuning(max_bound_bytes=3 * one))
    for batch in (1, 2, 3, 4, 1, 200):
        out = runner({"x": np.full((batch, 256), 2, np.int8)})
        assert (out[model.outputs[0].name] == 512).all()
        assert nb.IDLE_SETS.held_bytes() <= 3 * one


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # (the cfunc's printed exception)
def test_a_kernel_that_raises_stops_the_program():
    """A kernel's exception inside the program (a cfunc prints it) stops the run with an error."""
    from cvm.interp.numba_kernels import elementwise, wholeplan
    x, out = np.arange(8, dtype=np.int32), np.zeros(8, np.int32)
    bound = wholeplan.bind([call(elementwise.div_const, x, 0, out)], [("x", x)], [("y", out)])
    [(run, args)] = bound.calls
    with pytest.raises(RuntimeError, match="raised"):
        run(*args)


def test_no_writable_step_folder_keeps_the_per_step_path(tmp_path, monkeypatch):
    """Where the generated steps cannot be written, a set takes the per-step path (same outputs)."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("CVM_WHOLEPLAN_DIR", str(blocker / "steps"))  # (a folder under a file)
    b = cvm.GraphBuilder()
    x = b.input("x", (7,), bits=8)
    model = b.build(b.op("requant", b.op("relu", x), b.const([3]), shift=1, bits=8))
    loaded = {k: sys.modules.pop(k) for k in list(sys.modules) if k.startswith(wholeplan_gen.PREFIX)}
    wholeplan_gen.step.cache_clear()
    try:
        runner = nb.prepare(model.graph, model.analysis, threads=1, wholeplan="always")
        xs = np.arange(-3, 4, dtype=np.int8).reshape(1, 7)
        assert_same(runner({"x": xs}), reference.run(model.graph, model.analysis, {"x": xs}))
        assert runner.wholeplan_segments(1) is None
    finally:
        wholeplan_gen.step.cache_clear()
        sys.modules.update(loaded)


def test_a_one_pixel_conv_whose_tap_is_in_the_padding_is_not_a_dense_layer():
    """A 1x1 conv on a 1x1 input with left padding and stride 2: its one output pixel reads only padding (the
    bias alone). The small-row dense twin (gemv_i32) once took it for a dense layer and added the pixel."""
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 1, 1), 12)
    model = b.build(b.op("conv2d", x, b.const(np.array([[[[5]], [[7]]]])), b.const(np.array([-100])),
                         strides=(2, 2), pads=(0, 1, 1, 0)))
    inputs = {"x": np.array([[[[3]], [[4]]]], np.int16)}
    want = reference.run(model.graph, model.analysis, inputs)
    assert int(want[model.graph.outputs[0]].reshape(-1)[0]) == -100
    for isa in nb.available_isas():
        got = nb.prepare(model.graph, model.analysis, isa=isa, wholeplan="always")(inputs)
        np.testing.assert_array_equal(got[model.graph.outputs[0]], want[model.graph.outputs[0]])
