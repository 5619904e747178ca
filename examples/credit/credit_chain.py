"""The credit example on the embedded chain: deploy the oracle and CreditLine, register the default-risk
model, stake three operators (in-process `cvm.chain.node.Operator`s, as `cvm demo` runs them), let
borrowers apply, step the operators until every application is decided, and read back the decisions and
the gas each transaction used. Used by run.py and tests/chain/test_credit_example.py."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import deploy, send

from credit_model import LINE_SHARES_PCT, MAX_LINE, int_cutoffs

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle_setup import ARTIFACTS, CONFIG, OracleSetup, callback_ok, run_until_answered, setup_oracle  # noqa: E402
from oracle_setup import gas_by_request as _gas_by_request  # noqa: E402

__all__ = ["ARTIFACTS", "CONFIG", "Deployed", "apply", "callback_ok", "deploy_example", "gas_by_request", "line",
           "run_until_decided"]
STATES = ("none", "pending", "approved", "denied")  # CreditLine.State


@dataclass
class Deployed(OracleSetup):
    credit: object = None
    window: int = 0  # CreditLine's challenge window in seconds

    @property
    def borrowers(self):
        return self.users


def deploy_example(model: cvm.Model, workdir: Path, backend: str = "numba", window: int = 0,
                   borrowers: int = 6) -> Deployed:
    """Chain, oracle (2 of 3), model registered by commit-reveal, CreditLine with the model's cutoffs,
    three staked operators; `borrowers` funded accounts to apply from."""
    s = setup_oracle(model, workdir, "file:credit_xgb.cvm", backend=backend, users=borrowers,
                     requests_in_flight=borrowers)
    step = float(np.max(model.outputs[0].scale))
    credit, r = deploy(s.w3, s.deployer, "CreditLine", s.oracle.address, model.hash, int_cutoffs(step),
                       list(LINE_SHARES_PCT), MAX_LINE, window, directory=ARTIFACTS)
    s.gas.insert(4, ["deploy CreditLine", r["gasUsed"], f"cutoffs {int_cutoffs(step)} (output units)"])
    return Deployed(**vars(s), credit=credit, window=window)


def apply(d: Deployed, borrower, features: bytes) -> tuple[int, int]:
    """CreditLine.applyForCredit paying the oracle's fee; returns (request id, fee)."""
    fee = d.oracle.functions.feeFor(d.model.hash).call()
    r = send(d.w3, borrower, d.credit.functions.applyForCredit(features), value=fee)
    return d.credit.events.Applied().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"], fee


def run_until_decided(d: Deployed, request_ids: list[int]) -> None:
    """Steps the operators until every application is decided (oracle_setup.run_until_answered)."""
    run_until_answered(d, request_ids, d.window)


def line(d: Deployed, borrower) -> dict:
    """CreditLine.lines(borrower) as a dict, with the state named."""
    state, tier, score, limit, features_hash, request_id = d.credit.functions.lines(borrower.address).call()
    return {"state": STATES[state], "tier": tier, "score": score, "limit": limit,
            "features_hash": bytes(features_hash), "request_id": request_id}


def gas_by_request(d: Deployed, from_block: int) -> dict[int, list[list]]:
    """request id -> [[transaction, gas, note]]: CreditLine.applyForCredit and the oracle's calls."""
    return _gas_by_request(d, d.credit, "Applied", "CreditLine.applyForCredit", from_block)
