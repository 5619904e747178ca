"""What every oracle example does on the embedded chain: deploy the oracle (2 of 3), register one model by
commit-reveal, stake three in-process operators (`cvm.chain.node.Operator`, as `cvm demo` runs them), step
them until the requests are answered, and list the gas of each request's transactions. The credit and
similarity examples build their consumer contract on top (examples/credit, examples/similarity)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import OracleConfig, call_struct, deploy_oracle, register_model, send
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.node import Operator, Status
from cvm.chain.store import ModelStore

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "examples" / "artifacts"  # written by contracts/compile.js from contracts/src/examples
CONFIG = OracleConfig(quorum=2, committee_size=3)
NUM_OPERATORS = 3
MAX_ROUNDS = 10  # operator passes before giving up on a request


@dataclass
class OracleSetup:
    chain: EmbeddedChain
    model: cvm.Model
    oracle: object
    operators: list
    users: list  # funded accounts for the example's requesters
    deployer: object
    gas: list = field(default_factory=list)  # [step, gas, note] rows of the setup

    @property
    def w3(self):
        return self.chain.w3


def setup_oracle(model: cvm.Model, workdir: Path, uri: str, backend: str = "numba", users: int = 6,
                 requests_in_flight: int = 6, config: OracleConfig = CONFIG) -> OracleSetup:
    """Chain, oracle, the model registered by commit-reveal, three staked operators; `users` funded
    accounts. An operator locks a bond (slash_amount) per request it commits to until the request
    closes, so each stakes enough to bond `requests_in_flight` requests at once."""
    store = ModelStore(workdir / "models")
    store.put(model)
    chain = EmbeddedChain(store, backend=backend, num_accounts=1 + NUM_OPERATORS + users)
    w3, (deployer, *accounts) = chain.w3, chain.keys
    dep = deploy_oracle(w3, deployer, config)
    gas = [["deploy ModelRegistry", dep.receipts["ModelRegistry"]["gasUsed"], ""],
           ["deploy InferenceOracle", dep.receipts["InferenceOracle"]["gasUsed"],
            f"k={config.quorum} of n={config.committee_size}, with its DisputeGame"]]
    committed, r = register_model(dep.registry, deployer, model, uri=uri)
    gas += [["register model: commit", committed["gasUsed"], ""], ["register model: register", r["gasUsed"], ""]]
    stake = config.min_stake + requests_in_flight * config.slash_amount
    keys, operators = accounts[:NUM_OPERATORS], []
    for i, key in enumerate(keys):
        r = send(w3, key, dep.oracle.functions.stake(), value=stake)
        gas.append([f"stake (operator {i + 1})", r["gasUsed"], ""])
        operators.append(Operator(w3, key, dep.oracle.address, store, workdir / f"node{i + 1}.sqlite", backend=backend))
    return OracleSetup(chain, model, dep.oracle, operators, accounts[NUM_OPERATORS:], deployer, gas)


def run_until_answered(s: OracleSetup, request_ids: list[int], window: int = 0) -> None:
    """Steps every operator until no request is pending (at most MAX_ROUNDS passes). Once every drawn
    operator has committed, the embedded chain's clock is moved past the commit deadline (seats are
    drawn until then, reveals open after it); with a challenge window, once the quorum has revealed, past
    the reveal deadline plus the window, so that an operator calls finalize."""
    for _ in range(MAX_ROUNDS):
        for op in s.operators:
            op.step()
        pending = [r for r in (call_struct(s.oracle.functions.getRequest(i)) for i in request_ids)
                   if r["status"] == Status.PENDING]
        if not pending:
            return
        if window and all(r["reveals"] >= CONFIG.quorum for r in pending):  # revealed: let the window pass
            s.chain.advance_time(max(r["revealDeadline"] for r in pending) + window + 10 - s.chain.timestamp())
        elif all(r["reveals"] == 0 for r in pending):  # committed: let the commit window pass
            s.chain.advance_time(max(max(r["commitDeadline"] for r in pending) + 1 - s.chain.timestamp(), 1))
    raise RuntimeError(f"requests {request_ids} still pending after {MAX_ROUNDS} operator rounds")


def callback_ok(s: OracleSetup, request_id: int) -> bool | None:
    """Whether the oracle's callback into the consumer succeeded (None: no callback yet)."""
    logs = s.oracle.events.CallbackResult().get_logs(from_block=0, argument_filters={"requestId": request_id})
    return bool(logs[-1]["args"]["success"]) if logs else None


def gas_by_request(s: OracleSetup, consumer, request_event: str, label: str, from_block: int) -> dict[int, list[list]]:
    """request id -> [[transaction, gas, note]] for every transaction from `from_block` on that named the
    request: the consumer's call that made it (found by its `request_event`, labelled `label`) and the
    oracle's calls (their requestId argument)."""
    rows: dict[int, list[list]] = defaultdict(list)
    oracle, target = s.oracle.address.lower(), consumer.address.lower()
    for n in range(from_block, s.w3.eth.block_number + 1):
        for tx in s.w3.eth.get_block(n, full_transactions=True)["transactions"]:
            to = (tx["to"] or "").lower()
            if to not in (oracle, target):
                continue
            receipt = s.w3.eth.get_transaction_receipt(tx["hash"])
            if to == target:
                made = getattr(consumer.events, request_event)().process_receipt(receipt, errors=DISCARD)
                if made:
                    rows[made[0]["args"]["requestId"]].append([label, receipt["gasUsed"], "request, fee paid"])
                continue
            fn, args = s.oracle.decode_function_input(tx.get("input", tx.get("data")))
            if "requestId" not in args:
                continue
            finalized = s.oracle.events.Finalized().process_receipt(receipt, errors=DISCARD)
            rows[args["requestId"]].append([f"oracle.{fn.fn_name}", receipt["gasUsed"],
                                            "finalises + consumer callback" if finalized else ""])
    return dict(rows)
