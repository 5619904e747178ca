"""The VNNI GEMM with the output step on its accumulators (vnni_direct.conv_vnni_direct: no int32
scratch, no out_rows pass) equals the reference bit for bit: output channels a multiple of 16 (whole
64-channel tiles, a 32-channel tile, a panel past og), requant and clamps or no output step at all
(int32 outputs), int8 and unsigned inputs (read in place or through the padded copy), 1x1 and 3x3
kernels with strides and groups, pixel counts that leave partial tiles and blocks, serial and split
between threads. Each case checks that the direct kernel ran where VNNI does.

Derandomized hypothesis; CVM_HYPOTHESIS_EXAMPLES scales the examples (default 1000 -> 50)."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import cvm
from cvm.interp import numba as nb
from strategies import Case
from test_numba_equivalence import check

EXAMPLES = max(1, int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000")) // 20)


@st.composite
def direct_conv(draw) -> Case:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    c = draw(st.sampled_from([4, 16, 24, 32, 40]))
    groups = draw(st.sampled_from([1, 1, 1, 2, 4])) if c % 4 == 0 else 1
    og = draw(st.sampled_from([16, 32, 48, 64, 96, 144, 160]))
    k = draw(st.sampled_from([1, 1, 3]))
    s = draw(st.sampled_from([1, 1, 2]))
    h, w = draw(st.integers(7, 14)), draw(st.integers(7, 14))  # > 8 output pixels (vnni_direct.eligible)
    n = draw(st.integers(1, 3))
    b = cvm.GraphBuilder()
    x = b.input("x", (c, h, w), 8)
    if draw(st.booleans()):  # unsigned: a relu6-like clip, proven in 0..255 (z = 0)
        x = b.op("clip", x, lo=0, hi=draw(st.sampled_from([6, 100, 127])))
    wt = rng.integers(-127, 128, (og * groups, c // groups, k, k))
    y = b.op("conv2d", x, b.const(wt), b.const(rng.integers(-9999, 9999, og * groups)), pads=(k // 2,) * 4,
             strides=(s, s), groups=groups)
    step = draw(st.sampled_from(["requant", "requant+clip", "none"]))
    if step != "none":
        y = b.op("requant", y, b.const(rng.integers(1 << 10, 1 << 15, og * groups)), shift=draw(st.integers(14, 26)),
                 bits=8, axis=0)
    if step == "requant+clip":
        y = b.op("clip", y, lo=draw(st.sampled_from([-5, 0])), hi=draw(st.sampled_from([6, 127])))
    model = b.build(y)
    return Case(model, {"x": rng.integers(-128, 128, (n, c, h, w)).astype(np.int8)})


def kernels(runner, xs: dict) -> set:
    """The kernels a bound run calls (bound as numba._Bound binds, with zero inputs)."""
    p = runner.plan
    env = {name: np.zeros(x.shape, p.values[name].dtype) for name, x in xs.items()}
    names = set()
    for step in p.steps:
        ins = [env[i] for i in step.inputs]
        out = np.empty((ins[0].shape[0],) + step.value.stored, step.value.dtype)
        names.update(getattr(fn, "__name__", "") for fn, _ in step.bind(ins, out))
        env[step.output] = out
    return names


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(case=direct_conv(), threads=st.integers(1, 3))
def test_direct_output_step_matches_reference(case, threads):
    check(case, threads=threads, split="always" if threads > 1 else "auto")
    if "vnni" in nb.available_isas():
        runner = nb.prepare(case.model.graph, case.model.analysis, isa="vnni", threads=1)
        if any("conv2d[vnni]" in str(s) for s in runner.plan.steps):
            assert "conv_vnni_direct" in kernels(runner, case.inputs)
