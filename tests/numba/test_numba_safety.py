"""The numba backend on attacker-shaped models: geometry at the verifier's bounds, no unpaid buffers,
caches bounded in bytes (docs/spec.md 5.4 and 9, "What the cost and the memory check pay for").

Every model here passes verification. The expected results are written out (or computed by a
few-line numpy loop), and both backends must give them."""
from __future__ import annotations

import glob
import json
import subprocess
import sys
import textwrap
import threading
import tracemalloc

import numpy as np
import pytest

import cvm
from cvm import limits
from cvm.conformance import DEFAULT_DIR
from cvm.interp import numba as numba_backend
from cvm.interp.numba_kernels import lower_mac, plan, threads

G = limits.MAX_GEOMETRY
I32_MIN, I32_MAX = limits.MIN_CLIP, limits.MAX_CLIP


def _same_on_both(model: cvm.Model, x: np.ndarray, want=None) -> np.ndarray:
    """Both backends (the numba one on every kernel path this CPU has) agree, and with `want`."""
    ref = model.run(x, backend="reference")
    if want is not None:
        np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(model.run(x, backend="numba"), ref)
    for isa in numba_backend.available_isas():
        got = numba_backend.prepare(model.graph, model.analysis, isa=isa)({model.inputs[0].name: x})
        np.testing.assert_array_equal(next(iter(got.values())), ref)
    return ref


def _labels(model: cvm.Model, isa: str) -> list[str]:
    """The plan's steps (planning needs no VNNI CPU: the kernels compile only when they run)."""
    p, _ = plan.build(model.graph, model.analysis, isa, threads.Pool(1), numba_backend.LOWERINGS)
    return [step.label for step in p.steps]


def _conv_path(model: cvm.Model) -> str:
    (label,) = [lb for lb in _labels(model, "portable") if lb.startswith("conv2d")]
    return label[label.index("[") + 1:label.index("]")]


# ------------------------------------------------------------------ conv2d geometry at the bounds

def _far_conv(path: str, groups: int = 1) -> tuple[cvm.Model, np.ndarray, np.ndarray]:
    """A 1x1 conv with strides and pads at 2^20: 3x3 outputs per channel, of which only the centre
    reads the input (the others are the bias alone). Weights and bits chosen for one kernel path."""
    b = cvm.GraphBuilder()
    bits, wv, wdt = 8, 3, "int8"
    c = 2
    o = c if path == "depthwise" else 3
    x = b.input("x", (c, 2, 2), bits=bits)
    cg = c // groups
    w = np.full((o, cg, 1, 1), wv, np.int64)
    w[1::2] *= -1
    bias = np.arange(o) - 1
    y = b.op("conv2d", x, b.const(w, dtype=wdt), b.const(bias, dtype="int8"), strides=[G, G],
             pads=[G, G, G, G], groups=groups)
    model = b.build(y)
    assert _conv_path(model) == path
    xs = (np.arange(2 * c * 4).reshape(2, c, 2, 2) - 7).astype(np.int8)
    want = np.broadcast_to(bias[None, :, None, None], (2, o, 3, 3)).copy()
    gi = np.arange(o) // (o // groups)
    for ch in range(o):  # the centre output reads x[:, :, 0, 0] (pad G, stride G: index G - G = 0)
        want[:, ch, 1, 1] += (xs[:, gi[ch] * cg:(gi[ch] + 1) * cg, 0, 0].astype(np.int64) * w[ch, :, 0, 0]).sum(1)
    return model, xs, want


@pytest.mark.parametrize("path,groups", [("i32", 1), ("depthwise", 2)])  # (i64: never for a verified model)
def test_conv_at_the_geometry_bound_gives_the_spec_result_on_every_path(path, groups):
    model, x, want = _far_conv(path, groups)
    tracemalloc.start()
    _same_on_both(model, x, want)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 << 20, f"{peak} bytes allocated for a model of {model.gas} gas"


def test_conv_taps_2_20_apart_read_only_real_input():
    """Stride, dilation and pads all 2^20: each output's taps are 2^20 apart, so each reads at most
    one real pixel; no index may wrap onto the input (the spec's result has those outputs at 0)."""
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 3, 1), bits=8)
    y = b.op("conv2d", x, b.const(np.array([[[[1], [10]]]]), dtype="int8"), strides=[G, 1], dilations=[G, 1],
             pads=[G, 0, G, 0])
    model = b.build(y)
    assert model.analysis.tensors[y].shape == (1, 2, 1)
    xs = np.array([[[[5], [6], [7]]]], np.int8)
    # output i reads padded rows i*G and i*G + G, i.e. input rows i*G - G and i*G
    want = np.array([10 * 5, 1 * 5]).reshape(1, 1, 2, 1)  # rows (-G, 0) and (0, G): x[0] through one tap each
    _same_on_both(model, xs, want)


def test_conv_with_a_2_20_row_kernel_over_the_padding():
    """A kernel 2^20 rows tall, nearly all of them in the padding: the result is the few real taps."""
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 2, 1), bits=8)
    kh = G
    w = np.zeros((1, 1, kh, 1), np.int64)
    w[0, 0, G - 3:, 0] = [2, 3, 4]
    y = b.op("conv2d", x, b.const(w, dtype="int8"), pads=[G - 2, 0, 0, 0])
    model = b.build(y)
    xs = np.array([[[[11], [-13]]]], np.int8)
    # one output; input row r sits at padded row G - 2 + r, the taps G-2 and G-1 of weight 3 and 4
    _same_on_both(model, xs, np.array([[[[3 * 11 + 4 * -13]]]]))


# ------------------------------------------------------------------ path selection (planning only)

def test_vnni_path_is_refused_when_its_padded_copy_is_not_paid_for():
    """The padded uint8 copy of this conv would be 2^42 bytes per sample for ~100 gas."""
    b = cvm.GraphBuilder()
    x = b.input("x", (4, 2, 2), bits=8)
    model = b.build(b.op("conv2d", x, b.const(np.ones((4, 4, 1, 1), np.int8)), strides=[G, G], pads=[G, G, G, G]))
    assert not any("[vnni]" in label for label in _labels(model, "vnni"))


def test_vnni_path_is_refused_when_its_packed_weights_are_not_paid_for():
    """One output channel, dilated: each weight byte would become 128 bytes of 32-channel panels and
    4-byte runs (512 KiB for 4096 weights and one output pixel, ~4100 gas)."""
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 1, 1), bits=8)
    model = b.build(b.op("conv2d", x, b.const(np.ones((1, 1, 64, 64), np.int8)), dilations=[2, 2],
                         pads=[63, 63, 63, 63]))
    assert model.analysis.tensors[model.graph.outputs[0]].shape == (1, 1, 1)
    assert not any("[vnni]" in label for label in _labels(model, "vnni"))
    assert not lower_mac.vnni_buffers_paid(dict(h=1, w=1, c=1, kh=64, kw=64, dh=2, dw=2, pt=63, pl=63, pb=63,
                                                pr=63, oh=1, ow=1), 1, 1, 1)


def _honest_models() -> list[tuple[str, cvm.Model]]:
    paths = sorted(glob.glob("fixtures/models/*.cvm")) + sorted(glob.glob(f"{DEFAULT_DIR}/**/*.cvm", recursive=True))
    return [(p, cvm.load(p)) for p in paths]


def test_honest_models_keep_their_paths(monkeypatch):
    """The rule changes no committed model's plan (so no speed): the same steps with it switched off,
    and the fixtures' convs still take the VNNI path."""
    vnni_nodes = 0
    for name, model in _honest_models():
        with_rule = _labels(model, "vnni")
        monkeypatch.setattr(lower_mac, "vnni_buffers_paid", lambda *args: True)
        without = _labels(model, "vnni")
        monkeypatch.undo()
        assert with_rule == without, name
        vnni_nodes += sum("[vnni]" in label for label in with_rule)
    assert vnni_nodes >= 50


def test_vnni_rule_on_ordinary_geometry():
    def geom(h, c, k, pad, o):
        return dict(h=h, w=h, c=c, kh=k, kw=k, dh=1, dw=1, pt=pad, pl=pad, pb=pad, pr=pad, oh=h, ow=h), o
    g, o = geom(7, 64, 3, 1, 64)
    assert lower_mac.vnni_buffers_paid(g, 1, o, 64)
    g, o = geom(1, 8, 3, 1, 8)  # 3x3 on a 1x1 map: the padded copy is 9x the input
    assert lower_mac.vnni_buffers_paid(g, 1, o, 8)
    dense = dict(h=1, w=1, c=30, kh=1, kw=1, dh=1, dw=1, pt=0, pl=0, pb=0, pr=0, oh=1, ow=1)
    assert lower_mac.vnni_buffers_paid(dense, 1, 1, 30)  # an int8 dense layer with one output
    huge = dict(h=2, w=2, c=4, kh=1, kw=1, dh=1, dw=1, pt=G, pl=G, pb=G, pr=G, oh=3, ow=3)
    assert not lower_mac.vnni_buffers_paid(huge, 1, 4, 4)


# ------------------------------------------------------------------ kernel buffers proportional to the work

_BLOCK_BUFFER_CHILD = textwrap.dedent("""
    import json, resource, sys
    import numpy as np
    import cvm
    from cvm.interp import numba as nb

    def conv(kh, pads):
        b = cvm.GraphBuilder()
        x = b.input("x", (1, 1, 1), bits=8)
        return b.build(b.op("conv2d", x, b.const(np.ones((1, 1, kh, kh), np.int8)), pads=pads))

    big = conv(2048, [1024, 1024, 1023, 1023])  # one output pixel of 2^22 taps
    assert big.analysis.tensors[big.graph.outputs[0]].shape == (1, 1, 1)
    run = nb.prepare(big.graph, big.analysis, isa="portable", threads=1)
    small = conv(301, [150, 150, 150, 150])  # the same kernel types: int8 input, int16 weights, int32 output
    nb.prepare(small.graph, small.analysis, isa="portable", threads=1)({"x": np.ones((1, 1, 1, 1), np.int8)})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    y = run({"x": np.full((1, 1, 1, 1), 5, np.int8)})
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({"label": run.describe(), "y": int(next(iter(y.values())).ravel()[0]), "grew_kib": grew}))
""")


def test_conv_block_buffer_is_bounded_by_the_output_rows():
    """conv_i32 packs BLOCK_ROWS (64) output pixels of k taps at a time: with one output pixel and
    k = 2^22 a full block would be 512 MiB of int16 for ~4M gas; only the rows that exist are packed."""
    proc = subprocess.run([sys.executable, "-c", _BLOCK_BUFFER_CHILD], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "[i32]" in r["label"]
    assert r["y"] == 5
    assert r["grew_kib"] < 128 << 10, f"a run grew the resident set by {r['grew_kib']} KiB"


# ------------------------------------------------------------------ other ops at their bounds

@pytest.mark.parametrize("kernel,pads,dilations,strides", [
    ((G, 1), (G - 3, 0, 0, 0), (1, 1), (G, 1)),  # a 2^20-row window over a 4-row input
    ((2, 2), (G, G, G, G), (G, G), (G, G)),  # taps 2^20 apart
    ((3, 1), (2, 0, 2, 0), (1, 1), (G, 1)),  # stride at the bound
])
def test_max_pool_at_the_geometry_bound(kernel, pads, dilations, strides):
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 4, 3), bits=8)
    try:
        model = b.build(b.op("max_pool2d", x, kernel=kernel, pads=pads, dilations=dilations, strides=strides))
    except cvm.VerifyError as e:
        assert e.rule in ("attrs.pads", "shape.empty")
        return
    x = np.arange(-12, 12, dtype=np.int8).reshape(1, 2, 4, 3)
    _same_on_both(model, x)


def test_max_pool_window_of_2_20_rows_gives_the_column_max():
    b = cvm.GraphBuilder()
    x = b.input("x", (1, 4, 2), bits=8)
    model = b.build(b.op("max_pool2d", x, kernel=(G, 1), pads=(G - 4, 0, 0, 0), strides=(G, 1)))
    xs = np.array([[[[3, -9], [7, -8], [-1, -7], [2, -6]]]], np.int8)
    _same_on_both(model, xs, xs.max(axis=2, keepdims=True))


def test_clip_slice_requant_at_their_bounds():
    b = cvm.GraphBuilder()
    x = b.input("x", (6, 5), bits=16)
    y = b.op("clip", x, lo=I32_MIN, hi=I32_MAX)
    y = b.op("slice", y, starts=[1, 0], ends=[6, 5], steps=[G, 2])
    y = b.op("requant", y, b.const([3]), shift=1, bits=8, axis=limits.MAX_AXIS)
    model = b.build(y)
    x = np.random.default_rng(0).integers(-32767, 32768, (3, 6, 5)).astype(np.int16)
    want = np.clip((x[:, 1:2, 0::2].astype(np.int64) * 3 + 1) >> 1, -127, 127)
    _same_on_both(model, x, want)


def test_clip_with_int32_bounds_does_not_depend_on_what_was_compiled_before():
    """Typed once as int64 arguments: the same result whatever ran first in this process."""
    x = np.array([[-(2 ** 31 - 1), -1, 7, 2 ** 31 - 1]], np.int32)
    for lo, hi in ((I32_MIN, 5), (-5, I32_MAX), (0, 0), (I32_MIN, -(2 ** 31 - 1)), (I32_MAX, I32_MAX)):
        b = cvm.GraphBuilder()
        xi = b.input("x", (4,), bits=32)
        model = b.build(b.op("clip", xi, lo=lo, hi=hi))
        _same_on_both(model, x, np.clip(x.astype(np.int64), lo, hi))


def test_fused_conv_chain_with_int32_clip_and_requant_axis_5():
    """conv -> clip(int32 range) -> requant (per tensor, axis 5) -> relu -> add -> clip at int32
    extremes: fused into the conv's output step, the same as the reference."""
    rng = np.random.default_rng(3)
    b = cvm.GraphBuilder()
    x = b.input("x", (3, 5, 4), bits=8)
    h = b.op("conv2d", x, b.const(rng.integers(-127, 128, (4, 3, 3, 3)), dtype="int8"), pads=[1, 1, 1, 1])
    h = b.op("clip", h, lo=I32_MIN, hi=I32_MAX)
    h = b.op("requant", h, b.const([12345]), shift=20, bits=8, axis=limits.MAX_AXIS)
    h = b.op("relu", h)
    r = b.op("conv2d", x, b.const(rng.integers(-127, 128, (4, 3, 1, 1)), dtype="int8"))
    h = b.op("add", h, r)
    h = b.op("clip", h, lo=I32_MIN, hi=I32_MAX)
    model = b.build(h)
    assert any("+" in label for label in _labels(model, "portable"))  # the chain was fused
    xs = rng.integers(-127, 128, (4, 3, 5, 4)).astype(np.int8)
    _same_on_both(model, xs)


@pytest.mark.parametrize("edge", ["low", "high"])
def test_lut_at_the_edges_of_its_domain(edge):
    """Inputs near int32's ends, offsets that put them at the table's first and last entries."""
    b = cvm.GraphBuilder()
    x = b.input("x", (5,), bits=32)
    n = limits.MAX_LUT_SIZE
    if edge == "low":
        h = b.op("clip", x, lo=I32_MIN, hi=I32_MIN + n - 1)
        lo = -(2 ** 31 - 1)  # the input's own bound (bits 32), so clip's output starts there
        offset = lo
    else:
        h = b.op("clip", x, lo=I32_MAX - n + 1, hi=I32_MAX)
        lo = I32_MAX - n + 1
        offset = lo
    table = (np.arange(n) * 7919 % 65521) - 32760
    model = b.build(b.op("lut", h, b.const(table, dtype="int32"), offset=offset))
    xs = np.array([[-(2 ** 31 - 1), -(2 ** 31 - 2), 0, 2 ** 31 - 2, 2 ** 31 - 1]], np.int32)
    clipped = np.clip(xs.astype(np.int64), lo, lo + n - 1 - (1 if edge == "low" else 0))
    _same_on_both(model, xs, table[clipped - offset])


def test_div_by_the_largest_divisors():
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=32)
    model = b.build(b.op("div", x, b.const([I32_MAX, I32_MAX - 1, 1 << 30, 3], dtype="int32")))
    xs = np.array([[2 ** 31 - 1, -(2 ** 31 - 1), 2 ** 31 - 1, -(2 ** 31 - 1)],
                   [-(2 ** 30), 2 ** 30, -(2 ** 29), 5]], np.int32)
    d = np.array([I32_MAX, I32_MAX - 1, 1 << 30, 3], np.int64)
    _same_on_both(model, xs, (2 * xs.astype(np.int64) + d) // (2 * d))


def test_sum_and_max_over_2_24_elements():
    n = limits.LIMITS[1].tensor_elements
    b = cvm.GraphBuilder()
    x = b.input("x", (16, n // 16), bits=8)
    model = b.build([b.op("sum", x, axes=[0, 1]), b.op("max", x, axes=[1, 0])])
    xs = np.full((1, 16, n // 16), 127, np.int8)
    xs[0, :, ::3] = -127
    got = list(model.run(xs, backend="numba").values())
    want = list(model.run(xs, backend="reference").values())
    s = int(xs.astype(np.int64).sum())
    for g, w, v in zip(got, want, (s, 127)):
        assert g.dtype == w.dtype and g.ravel().tolist() == w.ravel().tolist() == [v]


def test_pad_at_the_geometry_bound():
    b = cvm.GraphBuilder()
    x = b.input("x", (3,), bits=8)
    model = b.build(b.op("pad", x, pads=[G - 10, 7], value=-3))
    xs = np.array([[1, 2, 3]], np.int8)
    want = np.full((1, G), -3, np.int64)
    want[0, G - 10:G - 7] = [1, 2, 3]
    _same_on_both(model, xs, want)


# ------------------------------------------------------------------ the buffer cache

def _relu_model(n: int = 1024) -> cvm.Model:
    b = cvm.GraphBuilder()
    x = b.input("x", (n,), bits=8)
    return b.build(b.op("relu", b.op("relu", x)))


def _budgeted(model: cvm.Model, threads: int | None = None, **tuning):
    """model's numba runner with these Tuning fields, and a call of it on one input array -> its output."""
    runner = numba_backend.prepare(model.graph, model.analysis, threads=threads, tuning=numba_backend.Tuning(**tuning))
    name, out = model.inputs[0].name, model.outputs[0].name
    return runner, lambda x: runner({name: x})[out]


def test_buffer_cache_is_bounded_in_bytes(monkeypatch):
    model = _relu_model()
    monkeypatch.setattr(numba_backend.Runner, "batch_parts", lambda self, batch: 1)  # one set per call
    # wholeplan_max_bytes=0: per-step sets (a whole-plan set also holds its copy of the constants, not
    # proportional to the batch: test_numba_wholeplan)
    runner, run = _budgeted(model, wholeplan_max_bytes=0)
    run(np.zeros((1, 1024), np.int8))
    per_sample = runner.cached_bytes()  # the input buffer and the outputs the plan keeps, int8
    assert per_sample >= 2 * 1024
    budget = 20 * per_sample
    runner, run = _budgeted(model, wholeplan_max_bytes=0, max_bound_bytes=budget)
    for batch in (1, 2, 4, 8, 16, 2, 1):  # 16 drops 1, 2, 4 and 8 (least recently used first)
        np.testing.assert_array_equal(run(np.full((batch, 1024), -3, np.int8)), 0)
        assert numba_backend.IDLE_SETS.held_bytes() <= budget
    assert runner.cached_bytes() == (16 + 2 + 1) * per_sample  # least recently used dropped first
    np.testing.assert_array_equal(run(np.ones((64, 1024), np.int8)), 1)  # over the whole budget:
    assert runner.cached_bytes() == (16 + 2 + 1) * per_sample  # served its call, not kept


def test_buffer_cache_budget_is_shared_by_threads_and_runners():
    """One cache for the process: runners and threads calling at once do not multiply its budget, and
    no two running calls share buffers."""
    per_sample = 1024 * 3
    budget = 100 * per_sample
    runners = [_budgeted(_relu_model(), max_bound_bytes=budget) for _ in range(2)]
    errors = []

    def work(t):
        try:
            rng = np.random.default_rng(t)
            for i in range(30):
                run = runners[(t + i) % 2][1]
                batch = int(rng.integers(1, 40))
                x = rng.integers(-127, 128, (batch, 1024)).astype(np.int8)
                np.testing.assert_array_equal(run(x), np.maximum(x, 0))
                assert numba_backend.IDLE_SETS.held_bytes() <= budget
        except BaseException as e:  # reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    assert sum(r.cached_bytes() for r, _ in runners) <= budget


def test_a_collected_runner_leaves_no_buffers():
    import gc
    model = _relu_model(4096)
    model.run(np.ones((8, 4096), np.int8))
    runner = model.runner("numba")
    held = runner.cached_bytes()
    assert held >= 4096 * 2  # an input and an output buffer at least (the batch may run in parts)
    before = numba_backend.IDLE_SETS.held_bytes()
    del model, runner
    gc.collect()
    assert numba_backend.IDLE_SETS.held_bytes() <= before - held


def test_a_smaller_budget_revokes_the_hot_sets_of_live_runners():
    """A runner's hot slot (its last set, taken without the cache's lock) counts in the cache's bytes and
    is revocable: a runner of a smaller budget (Tuning.max_bound_bytes) keeps the one cache within it at
    its calls, another runner alive with its hot set included, and that runner still runs after its set
    was revoked; a set over the smaller budget serves its call and is not kept."""
    keep, keep_run = _budgeted(_relu_model(), threads=1)
    keep_run(np.zeros((64, 1024), np.int8))  # its hot set: 64 samples (one thread: the batch in one part)
    hot = keep.cached_bytes()
    budget = hot // 2  # the live runner's set alone is over it
    small, run = _budgeted(_relu_model(), max_bound_bytes=budget)
    for batch in (1, 2, 4, 8, 2, 1, 64):
        np.testing.assert_array_equal(run(np.full((batch, 1024), -3, np.int8)), 0)
        assert numba_backend.IDLE_SETS.held_bytes() <= budget
    assert keep.cached_bytes() == 0 and small.cached_bytes() <= budget
    np.testing.assert_array_equal(keep_run(np.ones((64, 1024), np.int8)), 1)
