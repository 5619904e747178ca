"""Differential test of the Solidity referee (contracts/src/Referee.sol) against the reference
interpreter, on the embedded chain (cvm/chain/referee_diff.py; docs/chain.md, "Differential test of
the referee"):

- CASES random instances of each op the referee supports (every op of opsets 1, 2 and 3), seed SEED:
  every element checked equals the reference interpreter's, and no instance reverts (the words
  referee.needed names are the words the referee reads). One test per op, so pytest -n spreads them.
- the harness (RefereeHarness, Referee._compute in a batch) gives what Referee.evaluate itself gives
  with real multiproofs, on an instance of each op;
- the comparison has teeth: a wrong expected value and a missing word are both reported.
- regressions: the disagreements the differential test found, kept as fixed cases.

The long run: `python -m cvm.chain.referee_diff --cases N --seed S`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cvm.builder import GraphBuilder
from cvm.chain import referee_diff as rd
from cvm.chain.contracts import deploy
from cvm.chain.referee_cases import DRAWS
from cvm.chain.referee_ops import REFEREE_OPS
from cvm.ops import OPSETS
from cvm.values import storage_dtype

pytestmark = pytest.mark.chain
SEED = 27
CASES = 500  # per op; docs/chain.md gives the time of the run and the long run's figures


@pytest.fixture(scope="module")
def harness():
    return rd.Harness()


def test_every_op_of_every_opset_is_drawn():
    ops = {op for table in OPSETS.values() for op in table}
    assert ops == set(REFEREE_OPS) == set(DRAWS)
    assert {op: rd.opsets_of(op) for op in ("relu", "gather")} == {"relu": [1, 2, 3, 4], "gather": [2, 3, 4]}


@pytest.mark.parametrize("op", list(REFEREE_OPS))
def test_referee_equals_the_reference_on_random_instances(harness, op):
    tally = rd.run_op(harness, op, CASES, SEED)
    print(f"\n{op}: {tally.cases} cases, {tally.elements} elements, {tally.equal} equal, "
          f"{tally.refused} draws refused, {tally.seconds:.1f} s")
    assert tally.differences == [], "\n".join(tally.differences[:20])
    assert tally.cases == CASES and tally.equal == tally.elements >= CASES
    assert tally.refused < CASES, "the draws should mostly be valid models"


def test_the_harness_computes_what_evaluate_does(harness):
    """Referee.evaluate with the multiproofs referee.operand makes (the dispute game's call) gives the
    reference's value and the harness's, on instance 0 of each op."""
    w3 = harness.chain.w3
    contract, _ = deploy(w3, harness.chain.keys[0], "Referee")
    for op in REFEREE_OPS:
        inst, _ = rd.build(op, SEED, 0)
        assert harness.compute([inst]) == [inst.expected], inst.label
        for e, want in zip(inst.elements, inst.expected):
            value, _ = contract.functions.evaluate(inst.spec.as_tuple(), e, rd.evaluate_args(inst, e)).call()
            assert value == want, (inst.label, e)


def test_a_difference_and_a_missing_word_are_reported(harness):
    inst, _ = rd.build("conv2d", SEED, 1)
    wrong = dataclasses.replace(inst, expected=[v + 1 for v in inst.expected])
    tally = rd.Tally()
    rd.compare(harness, [inst, wrong], tally)
    assert tally.equal == len(inst.elements) and len(tally.differences) == len(inst.elements)
    assert "reference" in tally.differences[0] and inst.label in tally.differences[0]
    pos = max(range(len(inst.operands)), key=lambda p: len(inst.operands[p][0]))
    idx, words, proof = inst.operands[pos]
    short = list(inst.operands)
    short[pos] = (idx[1:], words[1:], proof)
    tally = rd.Tally()
    rd.compare(harness, [inst, dataclasses.replace(inst, operands=short)], tally)
    assert tally.equal == len(inst.elements) and len(tally.differences) == 1
    assert "reverted" in tally.differences[0]


# ---------------------------------------------------------------------------------------------- regressions

def _one_node(op: str, values, bits: int, **attrs) -> rd.Instance:
    b = GraphBuilder()
    x = b.input("x", (len(values),), bits)
    model = b.build(b.op(op, x, **attrs))
    return rd.instance(model, {"x": np.array([values], storage_dtype(bits))})


def test_isqrt_of_two_is_one(harness):
    """Found by this test (seed 27, isqrt cases 3, 92, 307, ...): Referee.isqrt started Newton's
    iteration at a/2 + 1, which for a = 2 is a itself, so it returned 2; it starts at (a + 1) / 2 now."""
    inst = _one_node("isqrt", [-7, 0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 24, 25, 2**31 - 1], 32)
    assert inst.expected[3] == 1
    assert harness.compute([inst]) == [inst.expected]
    contract, _ = deploy(harness.chain.w3, harness.chain.keys[0], "Referee")
    for e, want in zip(inst.elements, inst.expected):
        assert contract.functions.evaluate(inst.spec.as_tuple(), e, rd.evaluate_args(inst, e)).call()[0] == want
