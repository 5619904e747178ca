"""Tuning (cvm.interp.numba_kernels.tuning): the numba backend's measured choices in one frozen record that
prepare() passes down (issue 29, item 4). Each switch runs both ways equal to the reference on a model that
takes its path, and the kernels the two sides run differ (so neither side is vacuous) where this machine has
the path; every threshold at its smallest and at a huge value still gives the reference's outputs; the
record is checked where it enters, and no module keeps a switch or threshold of its own."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path

import numpy as np
import pytest

import cvm
import cvm.interp.numba_kernels as kernels_package
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.interp.numba_kernels import wholeplan_ops
from cvm.interp.numba_kernels.tuning import DEFAULT_TUNING, Tuning
from numba_helpers import ISAS, assert_same, each_isa

ROOT = Path(__file__).resolve().parents[2]
SWITCHES = ("pack", "direct", "dw_in_place", "lean", "gather", "special", "rowwise")
MODEL_OF = {"pack": "cnn", "direct": "cnn", "dw_in_place": "cnn", "lean": "rnn_sunspots_lstm",
            "gather": "rnn_sunspots_lstm", "special": "rnn_digits_gru", "rowwise": "rnn_sunspots_lstm"}
VNNI_ONLY = {"direct", "dw_in_place", "gather"}  # paths of the VNNI kernels (gather: AVX-512 gathers)


def _requant8(b, y: str, channels: int, acc_bits: int) -> str:
    m = np.random.default_rng(channels + acc_bits).integers(1 << 14, 1 << 15, channels)
    return b.op("requant", y, b.const(m), shift=acc_bits + 15 - 8, bits=8, axis=0)


def _cnn() -> cvm.Model:
    """A 1x1 conv (VNNI direct), a relu'd depthwise 3x3 of 32 channels (dw_vnni in place), a 3x3 conv with
    a residual add (direct, residual stage), a max pool, dense layers: every buffer of the set packed."""
    rng, b = np.random.default_rng(7), cvm.GraphBuilder()
    x = b.input("x", (16, 10, 10), 8)
    y = b.op("conv2d", x, b.const(rng.integers(-127, 128, (32, 16, 1, 1))), b.const(rng.integers(-999, 999, 32)))
    y = b.op("relu", _requant8(b, y, 32, 18))
    d = b.op("conv2d", y, b.const(rng.integers(-127, 128, (32, 1, 3, 3))), pads=(1, 1, 1, 1), groups=32)
    d = b.op("relu", _requant8(b, d, 32, 17))
    z = _requant8(b, b.op("conv2d", d, b.const(rng.integers(-127, 128, (32, 32, 3, 3))), pads=(1, 1, 1, 1)), 32, 22)
    y = b.op("relu", b.op("requant", b.op("add", z, d), b.const([1]), shift=1, bits=8))
    y = b.op("max_pool2d", y, kernel=(2, 2), strides=(2, 2))
    y = b.op("dense", b.op("flatten", y), b.const(rng.integers(-127, 128, (64, 800))))
    y = b.op("relu", _requant8(b, y, 64, 24))
    return b.build(b.op("dense", y, b.const(rng.integers(-127, 128, (10, 64)))))


@pytest.fixture(scope="module")
def models():
    """name -> (model, {batch: inputs}, {batch: the reference's outputs}), made once for the module."""
    from mrt.pipeline import convert
    cache = {}

    def get(name):
        if name not in cache:
            if name == "cnn":
                model = _cnn()
            else:
                calib = np.load(ROOT / "fixtures/data" / f"{name}_calib.npz")["x"]
                model = convert(ROOT / "fixtures/models" / f"{name}.onnx", calib, progress=False)
            spec, lim = model.inputs[0], (1 << (model.inputs[0].bits - 1)) - 1
            xs = {n: {spec.name: np.random.default_rng(n).integers(-lim, lim + 1, (n,) + tuple(spec.shape[1:]))
                      .astype(spec.dtype)} for n in (1, 3)}
            cache[name] = model, xs, {n: reference.run(model.graph, model.analysis, x) for n, x in xs.items()}
        return cache[name]
    return get


def _kernels(runner, xs: dict, program: bool) -> set:
    """The kernels a bound run calls (bound as numba._Bound binds, with zero inputs), per step or as the
    whole-plan program picks them (wholeplan_ops.translate)."""
    p, names = runner.plan, set()
    env = {name: np.zeros(x.shape, p.values[name].dtype) for name, x in xs.items()}
    for step in p.steps:
        ins = [env[i] for i in step.inputs]
        if (v := step.bound_view(ins)) is not None:
            env[step.output] = v
            continue
        out = np.zeros((ins[0].shape[0],) + step.value.stored, step.value.dtype)
        for c in step.bind(ins, out):
            calls = wholeplan_ops.translate(c, runner.tuning) if program else [c]
            names.update(getattr(f, "__name__", repr(f)) for f, _ in calls)
        env[step.output] = out
    return names


def _what_runs(switch: str, runner, xs: dict):
    """What a switch changes: the sets' bytes (pack), the planned kernels, or the program's."""
    if switch == "pack":
        return runner.cached_bytes()
    return set().union(*(_kernels(runner, x, switch not in ("direct", "dw_in_place")) for x in xs.values()))


@pytest.mark.parametrize("isa", each_isa())
@pytest.mark.parametrize("switch", SWITCHES)
def test_each_switch_both_ways_equals_reference(switch, isa, models):
    model, xs, want = models(MODEL_OF[switch])
    seen = {}
    for on in (True, False):
        runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=1, tuning=Tuning(**{switch: on}))
        for n, x in xs.items():
            assert_same(runner(x), want[n], f"[{switch}={on}, {isa}, batch {n}] ")
            assert_same(runner(x), want[n], f"[{switch}={on}, {isa}, batch {n}, again] ")
        seen[on] = _what_runs(switch, runner, xs)
    if isa == "vnni" or switch not in VNNI_ONLY:
        assert seen[True] != seen[False], f"{switch}: both sides ran the same kernels"


def _extreme(huge: bool) -> Tuning:
    """Every threshold at its smallest value (0, or 1 where 0 is no choice), or at 2^40."""
    values = {}
    for f in dataclasses.fields(Tuning):
        if f.type == "int":
            values[f.name] = 1 << 40 if huge else 0
    for name in ("batch_part_min", "max_parts_per_thread", "chunks_per_thread", "row_width", "narrow_shifts_tried"):
        values[name] = max(values[name], 1)
    return Tuning(**values)


@pytest.mark.parametrize("huge", [False, True])
@pytest.mark.parametrize("name", ["cnn", "rnn_sunspots_lstm", "rnn_digits_gru"])
def test_thresholds_at_either_extreme_equal_reference(name, huge, models):
    """Smallest: nothing cached, every call split, no whole-plan program, no twin of a size limit;
    huge: every size limit open. Two threads, batches cut and ops split, and one thread."""
    model, xs, want = models(name)
    for isa in ISAS:
        for threads in (1, 2):
            runner = nb.prepare(model.graph, model.analysis, isa=isa, threads=threads, tuning=_extreme(huge))
            for n, x in xs.items():
                assert_same(runner(x), want[n], f"[{isa}, {threads} threads, batch {n}, huge={huge}] ")


def test_the_record_is_checked_where_it_enters():
    model = _cnn()
    assert nb.prepare(model.graph, model.analysis).tuning == DEFAULT_TUNING == Tuning()
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_TUNING.pack = False
    with pytest.raises(ValueError, match="pack"):
        Tuning(pack=1)
    with pytest.raises(ValueError, match="max_bound_bytes"):
        Tuning(max_bound_bytes=-1)
    with pytest.raises(ValueError, match="batch_part_min"):
        Tuning(batch_part_min=0)
    with pytest.raises(ValueError, match="gemv_max_rows"):
        Tuning(gemv_max_rows=8.0)
    with pytest.raises(TypeError, match="tuning"):
        nb.prepare(model.graph, model.analysis, tuning={"pack": False})
    assert Tuning.switches() == SWITCHES


def test_no_module_keeps_a_switch_or_threshold_of_its_own():
    """Every choice is a field: no module of the backend defines one under the field's upper-case name
    (the module switches and thresholds they replaced), so none can be flipped behind the record's back."""
    modules = [nb] + [importlib.import_module(f"{kernels_package.__name__}.{m.name}")
                      for m in pkgutil.iter_modules(kernels_package.__path__)]
    names = {f.name.upper() for f in dataclasses.fields(Tuning)} | {
        "MAX_BOUND_BYTES", "MAX_BOUND_SETS", "HOT_MAX_BYTES", "WHOLEPLAN_MAX_BYTES", "MAX_PARTS_PER_THREAD",
        "BATCH_PART_MIN", "CHUNKS_PER_THREAD", "COLOR_MIN_BYTES", "MAX_MEETING_PAIRS", "PAR_MIN_MACS",
        "PAR_MIN_BYTES", "PAR_MIN_ELEMENTS", "PAR_MIN_TAPS", "MAX_ROWS", "MAX_DENSE_K", "SCAN", "MAX_DOMAIN",
        "SHIFTS_TRIED", "DW_ROWS_MAX_CHANNELS", "CHANNELS_LAST_LOOP_MAX_C", "MAX_FUSED_TABLE", "ROW_WIDTH",
        "VNNI_PAD_FACTOR", "VNNI_PACK_FACTOR"}
    found = [f"{m.__name__}.{n}" for m in modules for n in names if hasattr(m, n)]
    assert not found, found
