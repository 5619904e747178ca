"""The saturating rounding clip(round_shift(x, r), -L, L) lowered without a wide table
(cvm.interp.fhe_clamp): the split is exact over whole domains, its tables fit the budget, the
circuit equals the reference in clear mode and in simulation, and what cannot fit is refused."""
import numpy as np
import pytest

import cvm
from cvm.arith import round_shift
from cvm.interp import fhe as F
from cvm.interp.fhe_clamp import ClampPlan, plan_clamp
from cvm.interp.fhe_lookup import FHEUnsupported


@pytest.mark.parametrize("lo,hi,shift,bits,budget", [
    (-20000, 20000, 8, 6, 6), (-3000, 2500, 6, 6, 6), (-32768, 32767, 9, 6, 6), (-500, 700, 3, 5, 6),
    (0, 9000, 5, 6, 6), (-9000, 0, 5, 6, 6), (-4000, 4000, 6, 5, 5), (-100, 100, 3, 4, 4),
])
def test_split_equals_the_reference_on_every_value(lo, hi, shift, bits, budget):
    plan = plan_clamp(lo, hi, shift, bits, budget, node="t")
    xs = np.arange(lo, hi + 1, dtype=np.int64)
    lim = (1 << (bits - 1)) - 1
    assert np.array_equal(plan.evaluate(xs), np.clip(round_shift(xs, shift), -lim, lim))
    assert plan.tlu_bits <= budget and len(plan.rows) <= 3


def test_a_high_part_wider_than_the_budget_is_refused():
    with pytest.raises(FHEUnsupported, match="saturating rounding"):
        plan_clamp(-22517, 22517, 5, 6, 6, node="fc.round")


def _model(shift: int) -> cvm.Model:
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=12)
    h = b.op("dense", x, b.const(np.array([[3, -2, 1, 5], [1, 1, 1, 1]])), name="fc")
    h = b.op("requant", h, b.const([1]), shift=shift, bits=6, name="fc.round")
    return b.build(b.op("relu", h, name="relu"))


def test_circuit_equals_reference_in_clear_and_simulation():
    model = _model(shift=8)  # accumulator in [-22517, 22517]: the rounded value needs 9 bits, the clip brings 6
    runner = F.prepare(model.graph, model.analysis, lookup_bits=6)
    assert isinstance(runner.lookups["fc.round"].plan, ClampPlan)
    assert runner.lookup_report()["fc.round"]["table_bits"] <= 6
    rng = np.random.default_rng(0)
    x = rng.integers(-2047, 2048, (48, 4)).astype(np.int16)
    x[:16] //= 64  # some samples inside the clip window, the rest saturating on both sides
    want = model.run(x, backend="reference")
    out = model.graph.outputs[0]
    assert np.array_equal(runner({"x": x}, mode="clear")[out], want)
    assert np.array_equal(runner({"x": x[:12]}, mode="simulate")[out], want[:12])
    assert len(np.unique(want)) > 10 and (want == 31).any()  # the clip and the window are both reached


def test_per_channel_multipliers_are_a_clear_multiply_before_the_split():
    """requant(x, m_c, shift, bits) with small per-channel m_c (MRT's per-channel calibrated rounding)."""
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=12)
    h = b.op("dense", x, b.const(np.array([[3, -2, 1, 5], [1, 1, 1, 1], [2, 0, -1, 1]])), name="fc")
    h = b.op("requant", h, b.const([5, 7, 4], dtype="int32"), shift=10, bits=6, axis=0, name="fc.round")
    model = b.build(b.op("relu", h, name="relu"))
    runner = F.prepare(model.graph, model.analysis, lookup_bits=6)
    assert isinstance(runner.lookups["fc.round"].plan, ClampPlan)
    rng = np.random.default_rng(1)
    x = rng.integers(-2047, 2048, (48, 4)).astype(np.int16)
    x[:16] //= 32
    want = model.run(x, backend="reference")
    out = model.graph.outputs[0]
    assert np.array_equal(runner({"x": x}, mode="clear")[out], want)
    assert np.array_equal(runner({"x": x[:12]}, mode="simulate")[out], want[:12])


def test_a_rounding_that_narrows_its_value_reads_the_right_cell():
    """The digits MLP with per-channel windows and 7-bit tables, up to its first split: the cell index
    x + c_h in [-67038, 50970] needs 18 bits, its rounding by 14 lies in [-65536, 49152], 17 bits.
    Pinned to that narrower interval, concrete took the rounding for an overflow and the tables read
    the cell below (off by 32), in simulation and encrypted; cvm pins the hull (fhe_lookup.rounded_pin)."""
    mrt = pytest.importorskip("mrt")
    from pathlib import Path
    from cvm.ir import Graph

    fix = Path(__file__).parents[2] / "fixtures"
    with np.load(fix / "data" / "digits_mlp_calib.npz") as c, np.load(fix / "data" / "digits_mlp_test.npz") as t:
        calib, x = c["x"], t["x"][:6]
    model = mrt.convert(fix / "models" / "digits_mlp.onnx", calib, target="fhe", lookup_range="channels",
                        progress=False)
    g, cut = model.graph, "/0/Gemm_output_0.q.round"
    k = [n.output for n in g.nodes].index(cut) + 1
    used = {i for n in g.nodes[:k] for i in n.inputs}
    part = cvm.Model(Graph(g.inputs, {n: v for n, v in g.constants.items() if n in used}, g.nodes[:k], [cut]))
    runner = F.prepare(part.graph, part.analysis, lookup_bits=7)
    plan = runner.lookups[cut].plan
    assert isinstance(plan, ClampPlan) and plan.high_interval() == (-67038, 50970)
    xq = model.quantize_input(x)
    assert np.array_equal(runner({"x": xq}, mode="simulate")[cut], part.run(xq, backend="reference"))
