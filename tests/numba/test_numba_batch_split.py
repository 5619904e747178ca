"""A batch cut into parts that threads run whole (numba Runner, split "batch" / "auto") equals the
reference bit for bit, on every op family and the small chain models, parts of unequal sizes
included; and a pool thread never waits for work queued behind itself (no deadlock when the parts
contain ops large enough to split)."""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cvm.interp import numba as nb
from numba_helpers import assert_same, check
from strategies import FAMILIES, chain_case, inputs_for, op_case

EXAMPLES = int(os.environ.get("CVM_HYPOTHESIS_EXAMPLES", "1000"))
SETTINGS = settings(max_examples=max(1, EXAMPLES // 4), deadline=None, derandomize=True, database=None,
                    print_blob=False, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                                             HealthCheck.data_too_large])


@SETTINGS
@given(case=st.one_of(*(op_case(f) for f in sorted(FAMILIES)), chain_case()), threads=st.integers(2, 3),
       data=st.data())
def test_batch_parts_match_reference(case, threads, data):
    case.inputs = inputs_for(data.draw, case.model, data.draw(st.integers(2, 9)))
    check(case, threads=threads, split="batch")


def test_auto_split_parts_and_large_ops_inside_parts():
    """batch 64 on 2 threads: Tuning.max_parts_per_thread parts a thread; each part's convs are large enough that
    they would split their rows, and run on their own thread instead; outputs equal the one-thread run."""
    from cvm.tools.bench_models import resnet_int8
    model = resnet_int8()
    x = {"x": np.random.default_rng(0).integers(-127, 128, (64, 3, 32, 32)).astype(np.int8)}
    one = nb.prepare(model.graph, model.analysis, threads=1)
    two = nb.prepare(model.graph, model.analysis, threads=2)
    assert two.batch_parts(64) == 2 * two.tuning.max_parts_per_thread and two.batch_parts(3) == 1 and one.batch_parts(64) == 1
    want = one(x)
    assert_same(two(x), want)
    assert_same(nb.prepare(model.graph, model.analysis, threads=2, split="ops")(x), want)
