"""The similarity example (examples/similarity): a sentence encoder with two integer inputs (token ids and
attention mask) registered with ModelRegistry.registerInputs, run by the oracle's operators, and
PolicyMatcher deciding on chain, from the committed embeddings, which clause a claim matches. The clauses'
embeddings come from the oracle too; every decision must equal the contract's rule computed off chain on
the integer model's outputs (examples/similarity/similarity_chain.decide), and the float model's decision
where the float cosine is not within a hair of the threshold."""
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from chainkit import BACKEND, reverts

from cvm.chain.contracts import call_struct, send

pytestmark = pytest.mark.chain
pytest.importorskip("onnxruntime")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "similarity"
sys.path.insert(0, str(EXAMPLE))
from similarity_chain import (  # noqa: E402
    THRESHOLD, add_policies, claim, convert_source, decide, decide_float, deploy_example, gas_by_request,
    load_source, rows, stored_policies, submit_claims,
)

POLICY_ROWS = [0, 40, 80, 120]  # held-out sentences used as clauses
CLAIM_ROWS = [0, 41, 81, 121, 160, 200]  # one clause itself, three neighbours of clauses, two others


@pytest.fixture(scope="module")
def source():
    return load_source("fixture")


@pytest.fixture(scope="module")
def model(source):
    return convert_source(source)


@pytest.fixture(scope="module")
def example(model, tmp_path_factory):
    return deploy_example(model, tmp_path_factory.mktemp("similarity"), backend=BACKEND, claimants=len(CLAIM_ROWS))


def _inputs(model, source, index) -> list[bytes]:
    return [model.encode_input(rows(source, [i])) for i in index]


def test_wire_format_of_two_inputs(model, source):
    x = rows(source, [0, 1, 2])
    data = model.encode_input(x)
    ids, mask = model.inputs
    assert len(data) == 3 * (24 * ids.dtype.itemsize + 24 * mask.dtype.itemsize)
    assert data[:3 * 24 * ids.dtype.itemsize] == np.asarray(x["input_ids"], ids.dtype).tobytes()
    back = model.decode_input(data)
    assert all(np.array_equal(back[k], x[k]) for k in x)
    with pytest.raises(Exception, match="not a whole number of samples"):
        model.decode_input(data[:-1])
    with pytest.raises(Exception, match="exactly the inputs"):
        model.encode_input(x["input_ids"])


def test_registry_holds_both_inputs(example, model):
    reg = example.oracle.functions.registry().call()
    from cvm.chain.contracts import contract_at
    registry = contract_at(example.w3, "ModelRegistry", reg)
    m = call_struct(registry.functions.getModel(model.hash))
    extra = registry.functions.extraInputs(model.hash).call()
    assert m["inputBytes"] == len(model.encode_input(rows(load_source("fixture"), [0])))
    assert [tuple(m["input"]), *map(tuple, extra)] == [(list(s.shape[1:]), s.bits) for s in model.inputs]


def test_claims_are_decided_on_chain_as_the_integer_and_float_models_decide(example, model, source):
    d = example
    add_policies(d, _inputs(model, source, POLICY_ROWS))
    policies = stored_policies(d)
    want_policies = model.run(rows(source, POLICY_ROWS), backend="reference")
    assert all(np.array_equal(p, w) for p, w in zip(policies, want_policies))  # the oracle's outputs, as run here
    start = d.w3.eth.block_number + 1
    ids = submit_claims(d, _inputs(model, source, CLAIM_ROWS))
    claims_int = model.run(rows(source, CLAIM_ROWS), backend="reference")
    import onnxruntime as ort
    sess = ort.InferenceSession(str(source.onnx), providers=["CPUExecutionProvider"])
    fp = sess.run(None, rows(source, POLICY_ROWS))[0]
    fc = sess.run(None, rows(source, CLAIM_ROWS))[0]
    matched_any = False
    for rid, c_int, c_float in zip(ids, claims_int, fc):
        got = claim(d, rid)
        matched, best, dot = decide(policies, c_int)
        assert got["decided"] and (got["matched"], got["policy"], got["dot"]) == (matched, best, dot)
        f_matched, f_best, f_cos = decide_float(fp, c_float)
        if abs(f_cos - float(THRESHOLD)) > 0.01:  # float's decision is not a hair from the threshold
            assert matched == f_matched
            assert not matched or best == f_best
        matched_any |= matched
    assert matched_any  # the clause submitted as a claim matches itself
    gas = gas_by_request(d, start)[ids[0]]
    assert sum(g for _, g, _ in gas) > 0


def test_only_the_owner_adds_clauses_and_the_threshold_is_a_fraction(example):
    d = example
    fee = d.oracle.functions.feeFor(d.model.hash).call()
    with reverts("NotOwner"):
        send(d.w3, d.users[0], d.matcher.functions.addPolicy(b"\x00"), value=fee)
    from cvm.chain.contracts import deploy
    from similarity_chain import ARTIFACTS
    with reverts("BadThreshold"):
        deploy(d.w3, d.deployer, "PolicyMatcher", d.oracle.address, d.model.hash, 3, 2, directory=ARTIFACTS)


def test_decide_is_exact_at_the_threshold():
    p = [np.array([3, 4]), np.array([4, -3])]
    assert decide(p, np.array([3, 4]), Fraction(1, 1)) == (True, 0, 25)     # cos exactly 1
    assert decide(p, np.array([4, 3]), Fraction(24, 25)) == (True, 0, 24)   # cos exactly 24/25
    assert decide(p, np.array([4, 3]), Fraction(97, 100))[0] is False
    assert decide(p, np.array([-3, -4]), Fraction(0, 1)) == (False, 1, 0)   # best cosine 0: no match
