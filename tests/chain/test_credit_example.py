"""The credit example (examples/credit): a default-risk XGBoost model, converted by MRT, registered on the
oracle and used by CreditLine. Borrowers from the test split apply on the embedded chain; each on-chain
decision (state, tier, limit) must equal the float model's, and the score the integer model's output."""
import sys
from pathlib import Path

import numpy as np
import pytest
from chainkit import BACKEND, reverts

pytestmark = pytest.mark.chain
pytest.importorskip("onnxruntime")
pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "credit"
sys.path.insert(0, str(EXAMPLE))
from credit_chain import (  # noqa: E402
    ARTIFACTS, CONFIG, apply, callback_ok, deploy_example, gas_by_request, line, run_until_decided,
)
from credit_model import (  # noqa: E402
    DATA, LINE_SHARES_PCT, MAX_LINE, ONNX, convert_model, float_margin, int_cutoffs, line_of_tier, near_bound,
    split, tiers_of_margin,
)

from cvm.chain.contracts import deploy, send  # noqa: E402

if not (DATA.exists() and ONNX.exists()):
    pytest.skip("fixtures/models/credit_* missing (python fixtures/train/credit.py)", allow_module_level=True)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    model = convert_model()
    return deploy_example(model, tmp_path_factory.mktemp("credit"), backend=BACKEND, borrowers=5)


def test_integer_model_decides_every_test_applicant_as_float():
    model = convert_model()
    _, xte, _, _ = split()
    out = model.dequantize_output(model.run(model.quantize_input(xte), backend="reference"))
    fm, step = float_margin(xte), float(np.max(model.outputs[0].scale))
    assert model.graph.opset == 1
    assert not near_bound(fm, step).any()        # no applicant lies where either side would be right
    assert np.array_equal((out[:, 1] > 0), (fm > 0))
    assert np.array_equal(tiers_of_margin(out[:, 1]), tiers_of_margin(fm))


def test_borrowers_get_the_float_models_decision_on_chain(example):
    d, model = example, example.model
    _, xte, _, _ = split()
    fm = float_margin(xte)
    tiers = tiers_of_margin(fm)
    rows = [int(np.flatnonzero(tiers == t)[0]) for t in (3, 2, 1, 0)]  # one borrower per outcome
    start = d.w3.eth.block_number + 1
    inputs = [model.quantize_input(xte[i:i + 1]) for i in rows]
    requests = [apply(d, b, model.encode_input(q)) for b, q in zip(d.borrowers, inputs)]
    run_until_decided(d, [r for r, _ in requests])
    for borrower, i, q, (request_id, _) in zip(d.borrowers, rows, inputs, requests):
        got = line(d, borrower)
        assert callback_ok(d, request_id)
        assert got["score"] == int(model.run(q, backend="reference")[0, 1])   # the integer model's margin
        assert got["tier"] == tiers[i]
        assert got["state"] == ("denied" if tiers[i] == 0 else "approved")
        assert got["limit"] == line_of_tier(int(tiers[i])) == d.credit.functions.creditLimit(borrower.address).call()
        assert got["features_hash"] == d.w3.keccak(model.encode_input(q))
    round_gas = gas_by_request(d, start)[requests[0][0]]
    assert [r[0] for r in round_gas][:2] == ["CreditLine.applyForCredit", "oracle.commit"]
    assert any("callback" in r[2] for r in round_gas)


def test_a_pending_application_cannot_be_doubled_and_an_expired_one_is_refunded(example):
    d, model = example, example.model
    borrower = d.borrowers[4]
    features = model.encode_input(model.quantize_input(split()[1][:1]))
    request_id, fee = apply(d, borrower, features)
    with reverts("ApplicationPending"):
        apply(d, borrower, features)
    d.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)   # no operator stepped
    before = d.w3.eth.get_balance(borrower.address)
    send(d.w3, d.borrowers[0], d.credit.functions.reclaimExpired(request_id))  # anyone may trigger it
    assert d.w3.eth.get_balance(borrower.address) == before + fee
    assert line(d, borrower)["state"] == "none"


def test_tiers_must_tighten(example):
    d = example
    step = float(np.max(d.model.outputs[0].scale))
    loosening = list(reversed(int_cutoffs(step)))
    with reverts("BadTiers"):
        deploy(d.w3, d.chain.keys[0], "CreditLine", d.oracle.address, d.model.hash, loosening,
               list(LINE_SHARES_PCT), MAX_LINE, 0, directory=ARTIFACTS)


def test_with_a_challenge_window_the_decision_waits_for_finalize(tmp_path):
    """window > 0: k equal reveals are not final; after the window an operator calls finalize (the path
    where one honest operator beats a colluding majority) and CreditLine decides as float."""
    model = convert_model()
    d = deploy_example(model, tmp_path, backend=BACKEND, window=120, borrowers=1)
    _, xte, _, _ = split()
    request_id, _ = apply(d, d.borrowers[0], model.encode_input(model.quantize_input(xte[:1])))
    for op in d.operators:
        op.step()
    d.chain.advance_time(CONFIG.commit_window + 1)  # seats are drawn until the commit deadline
    for op in d.operators:
        op.step()
    assert line(d, d.borrowers[0])["state"] == "pending"    # revealed, but the window is open
    run_until_decided(d, [request_id])
    rows = gas_by_request(d, 0)[request_id]
    assert any(r[0] == "oracle.finalize" and "callback" in r[2] for r in rows)
    assert callback_ok(d, request_id)
    assert line(d, d.borrowers[0])["tier"] == tiers_of_margin(float_margin(xte[:1]))[0]
