"""`cvm demo`: the whole chain story in one process, on the embedded chain.

1. load a committed .cvm digit classifier and a real test image with its label;
2. deploy ModelRegistry, InferenceOracle (2 of 3) and the DigitGame consumer; register the model;
3. three operators stake and run as in-process loops against the chain's web3;
4. a player plays the game through the oracle: request, commits, reveals, consensus, callback;
5. the same image through the synchronous CVM precompile (DigitGame.playNow);
6. print the results and the gas of every step; exit non-zero if any check fails.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import OracleConfig, call_struct, deploy, deploy_oracle, register_model, send
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.node import Operator, Status
from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS, precompile_gas
from cvm.chain.store import ModelStore
from cvm.report import table

log = logging.getLogger("cvm.demo")

ROOT = Path(__file__).resolve().parents[2]
# (model, test data) pairs, the first one present is used
CANDIDATES = [
    ("fixtures/models/mnist_cnn.cvm", "fixtures/data/mnist_cnn_test.npz"),
    ("fixtures/models/digits_mlp.cvm", "fixtures/data/digits_mlp_test.npz"),
]
DEMO_CONFIG = OracleConfig(quorum=2, committee_size=3)
NUM_OPERATORS = 3
PRIZE = 10**16
MAX_ROUNDS = 10  # operator passes before the demo gives up on consensus


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def find_model(model_path: str | None, data_path: str | None) -> tuple[Path, Path]:
    if model_path:
        if not data_path:
            raise ValueError("--data is needed with --model")
        return Path(model_path), Path(data_path)
    for m, d in CANDIDATES:
        if (ROOT / m).exists() and (ROOT / d).exists():
            return ROOT / m, ROOT / (data_path or d)
    raise FileNotFoundError("no committed digit model found: looked for " + ", ".join(m for m, _ in CANDIDATES))


def load_sample(model: cvm.Model, data_path: Path, index: int) -> tuple[np.ndarray, int]:
    """One test image, quantized to the model's integer input, and its label."""
    data = np.load(data_path)
    x = data["x"][index:index + 1].reshape((1, *model.inputs[0].shape[1:]))
    x = model.quantize_input(x) if x.dtype.kind == "f" else x.astype(model.inputs[0].dtype)
    return x, int(data["y"][index])


@dataclass
class Demo:
    """The deployed demo: the chain, its contracts, the operators, and the gas table as it grows."""
    w3: object
    model: cvm.Model
    oracle: object
    game: object
    player: object
    operators_keys: list
    operators: list
    gas: list = field(default_factory=list)
    chain: EmbeddedChain | None = None


def setup(model: cvm.Model, model_file: Path, store: ModelStore, workdir: Path, backend: str) -> Demo:
    """Deploy the registry, the oracle and DigitGame on an embedded chain, register the model, stake."""
    chain = EmbeddedChain(store, backend=backend)
    w3, (deployer, *accounts) = chain.w3, chain.keys
    dep = deploy_oracle(w3, deployer, DEMO_CONFIG)
    gas = [["deploy ModelRegistry", dep.receipts["ModelRegistry"]["gasUsed"], ""],
           ["deploy InferenceOracle", dep.receipts["InferenceOracle"]["gasUsed"],
            f"k={DEMO_CONFIG.quorum} of n={DEMO_CONFIG.committee_size}, with its DisputeGame"]]
    committed, r = register_model(dep.registry, deployer, model, uri=f"file:{model_file.name}")
    gas.append(["register model: commit", committed["gasUsed"], "commit-reveal: no front-running"])
    gas.append(["register model: register", r["gasUsed"], "a block later"])
    game, r = deploy(w3, deployer, "DigitGame", dep.oracle.address, model.hash, PRIZE, 0, value=100 * PRIZE)
    gas.append(["deploy DigitGame", r["gasUsed"], ""])
    keys, operators = accounts[:NUM_OPERATORS], []
    for i, key in enumerate(keys):
        r = send(w3, key, dep.oracle.functions.stake(), value=DEMO_CONFIG.min_stake)
        gas.append([f"stake (operator {i + 1})", r["gasUsed"], ""])
        operators.append(Operator(w3, key, dep.oracle.address, store, workdir / f"node{i + 1}.sqlite", backend=backend))
    return Demo(w3, model, dep.oracle, game, accounts[NUM_OPERATORS], keys, operators, gas, chain)


def play_through_oracle(d: Demo, image: bytes, label: int) -> tuple[dict, int | None, int]:
    """DigitGame.play pays the fee; the operators step until the request is decided.
    Returns (the request, the callback's prediction, the fee)."""
    fee = d.oracle.functions.feeFor(d.model.hash).call()  # the minimum plus the model's gas times feePerGas
    r = send(d.w3, d.player, d.game.functions.play(image, label), value=fee)
    request_id = d.game.events.GameStarted().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]
    d.gas.append(["request (DigitGame.play)", r["gasUsed"], f"request {request_id}, fee {fee} wei"])
    for i in range(MAX_ROUNDS):
        for op in d.operators:
            op.step()
        if call_struct(d.oracle.functions.getRequest(request_id))["status"] != Status.PENDING:
            break
        if i == 0:  # committed: the commit window passes (every drawn operator may take a seat until its end)
            d.chain.advance_time(DEMO_CONFIG.commit_window + 1)
    d.gas += oracle_gas_rows(d, request_id)
    played = d.game.events.GamePlayed().get_logs(from_block=0)
    return (call_struct(d.oracle.functions.getRequest(request_id)), played[0]["args"]["predicted"] if played else None,
            fee)


def oracle_gas_rows(d: Demo, request_id: int) -> list[list]:
    """The operators' commits and reveals in chain order, so the table reads as the protocol ran."""
    steps = []
    for i, op in enumerate(d.operators):
        job = op.job(request_id)
        for what, tx in (("commit", job and job.commit_tx), ("reveal", job and job.reveal_tx)):
            if tx:
                receipt = d.w3.eth.get_transaction_receipt(tx)
                final = what == "reveal" and d.oracle.events.Finalized().process_receipt(receipt, errors=DISCARD)
                steps.append(((receipt["blockNumber"], receipt["transactionIndex"]),
                              [f"{what} (operator {i + 1})", receipt["gasUsed"], "finalise + callback" if final else ""]))
    rows, seen_final = [], False
    for _, row in sorted(steps, key=lambda s: s[0]):
        if row[0].startswith("reveal") and seen_final and not row[2]:
            row[2] = "after finalisation"
        seen_final = seen_final or row[2] == "finalise + callback"
        rows.append(row)
    return rows


def play_through_precompile(d: Demo, image: bytes, label: int) -> tuple[int, bool, bytes]:
    """DigitGame.playNow (the CVM precompile, synchronous), and a plain call of the precompile."""
    sync_pred, sync_won = d.game.functions.playNow(image, label).call({"from": d.player.address})
    r = send(d.w3, d.player, d.game.functions.playNow(image, label))
    d.gas.append(["DigitGame.playNow (precompile)", r["gasUsed"], f"of which CVM {precompile_gas(d.model, len(image))}"])
    raw = bytes(d.w3.eth.call({"to": d.w3.to_checksum_address(CVM_PRECOMPILE_ADDRESS), "data": d.model.hash + image}))
    return sync_pred, sync_won, raw


def run_demo(model_path: str | None = None, data_path: str | None = None, index: int = 0,
             backend: str = "numba") -> int:
    model_file, data_file = find_model(model_path, data_path)
    workdir = Path(tempfile.mkdtemp(prefix="cvm-demo-"))
    store = ModelStore(workdir / "models")
    model = store.get(store.put(model_file))
    x, label = load_sample(model, data_file, index)
    image = model.encode_input(x)
    expected = model.run(x, backend=backend)
    expected_hash, expected_class = cvm.output_hash(expected), int(np.argmax(expected[0]))
    print(f"model   {model_file.relative_to(ROOT) if model_file.is_relative_to(ROOT) else model_file}")
    print(f"        hash {model.hash_hex}, gas {model.gas} per sample, input {len(image)} bytes")
    print(f"sample  #{index} of {data_file.name}: label {label}, off-chain prediction {expected_class}")
    print()

    d = setup(model, model_file, store, workdir, backend)
    req, async_pred, fee = play_through_oracle(d, image, label)
    sync_pred, sync_won, raw = play_through_precompile(d, image, label)
    paid = sum(d.oracle.functions.claimable(k.address).call() for k in d.operators_keys)
    checks = [
        Check("oracle finalised", req["status"] == Status.FINALIZED, Status(req["status"]).name.lower()),
        Check("consensus output hash", bytes(req["outputHash"]) == expected_hash, "0x" + bytes(req["outputHash"]).hex()),
        Check("callback scored", async_pred == expected_class, f"predicted {async_pred}"),
        Check("precompile output", raw == model.encode_output(expected), f"{len(raw)} bytes"),
        Check("precompile scored", sync_pred == expected_class, f"predicted {sync_pred}"),
        Check("fee paid to the agreeing operators (the finaliser's callback gas included)", paid == fee,
              f"{paid} of {fee} wei"),
    ]
    print(table(["path", "prediction", "label", "correct", "output hash"], [
        ["off-chain CVM", expected_class, label, expected_class == label, "0x" + expected_hash.hex()[:16] + "…"],
        ["oracle (2 of 3)", async_pred, label, async_pred == label, "0x" + bytes(req["outputHash"]).hex()[:16] + "…"],
        ["precompile", sync_pred, label, sync_won, "0x" + cvm.output_hash(model.decode_output(raw)).hex()[:16] + "…"],
    ], "lrrll"))
    return report(d.gas, checks)


def report(gas: list[list], checks: list) -> int:
    print()
    print(table(["step", "gas", "note"], gas, "lrl"))
    print()
    print(table(["check", "result", "detail"], [[c.name, "ok" if c.ok else "FAILED", c.detail] for c in checks], "lll"))
    failed = [c.name for c in checks if not c.ok]
    print()
    print("demo: all checks passed" if not failed else f"demo: FAILED: {', '.join(failed)}")
    return 1 if failed else 0
