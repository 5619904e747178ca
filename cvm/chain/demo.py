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
from dataclasses import dataclass
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

    chain = EmbeddedChain(store, backend=backend)
    w3, (deployer, *accounts) = chain.w3, chain.keys
    operators_keys, player = accounts[:NUM_OPERATORS], accounts[NUM_OPERATORS]
    gas: list[list] = []

    dep = deploy_oracle(w3, deployer, DEMO_CONFIG)
    oracle, registry = dep.oracle, dep.registry
    gas += [["deploy ModelRegistry", dep.receipts["ModelRegistry"]["gasUsed"], ""],
            ["deploy InferenceOracle", dep.receipts["InferenceOracle"]["gasUsed"],
             f"k={DEMO_CONFIG.quorum} of n={DEMO_CONFIG.committee_size}"]]
    r = register_model(registry, deployer, model, uri=f"file:{model_file.name}")
    gas.append(["register model", r["gasUsed"], ""])
    game, r = deploy(w3, deployer, "DigitGame", oracle.address, model.hash, PRIZE, value=100 * PRIZE)
    gas.append(["deploy DigitGame", r["gasUsed"], ""])

    operators = []
    for i, key in enumerate(operators_keys):
        r = send(w3, key, oracle.functions.stake(), value=DEMO_CONFIG.min_stake)
        gas.append([f"stake (operator {i + 1})", r["gasUsed"], ""])
        operators.append(Operator(w3, key, oracle.address, store, workdir / f"node{i + 1}.sqlite", backend=backend))

    # --- asynchronous: the oracle
    fee = oracle.functions.feeFor(model.hash).call()  # the minimum plus the model's gas times feePerGas
    r = send(w3, player, game.functions.play(image, label), value=fee)
    request_id = game.events.GameStarted().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]
    gas.append(["request (DigitGame.play)", r["gasUsed"], f"request {request_id}, fee {fee} wei"])
    for _ in range(MAX_ROUNDS):
        for op in operators:
            op.step()
        if call_struct(oracle.functions.getRequest(request_id))["status"] != Status.PENDING:
            break
    oracle_steps = []  # in chain order, so the table reads as the protocol ran
    for i, op in enumerate(operators):
        job = op.job(request_id)
        for what, tx in (("commit", job and job.commit_tx), ("reveal", job and job.reveal_tx)):
            if tx:
                receipt = w3.eth.get_transaction_receipt(tx)
                final = what == "reveal" and oracle.events.Finalized().process_receipt(receipt, errors=DISCARD)
                oracle_steps.append(((receipt["blockNumber"], receipt["transactionIndex"]),
                                     [f"{what} (operator {i + 1})", receipt["gasUsed"], "finalise + callback" if final else ""]))
    oracle_steps.sort(key=lambda s: s[0])
    seen_final = False
    for _, row in oracle_steps:
        if row[0].startswith("reveal") and seen_final and not row[2]:
            row[2] = "after finalisation"
        seen_final = seen_final or row[2] == "finalise + callback"
        gas.append(row)
    req = call_struct(oracle.functions.getRequest(request_id))
    played = game.events.GamePlayed().get_logs(from_block=0)
    async_pred = played[0]["args"]["predicted"] if played else None

    # --- synchronous: the precompile
    sync_pred, sync_won = game.functions.playNow(image, label).call({"from": player.address})
    r = send(w3, player, game.functions.playNow(image, label))
    gas.append(["DigitGame.playNow (precompile)", r["gasUsed"],
                f"of which CVM {precompile_gas(model, len(image))}"])
    raw = bytes(w3.eth.call({"to": w3.to_checksum_address(CVM_PRECOMPILE_ADDRESS), "data": model.hash + image}))

    paid = sum(oracle.functions.claimable(k.address).call() for k in operators_keys)
    checks = [
        Check("oracle finalised", req["status"] == Status.FINALIZED, Status(req["status"]).name.lower()),
        Check("consensus output hash", bytes(req["outputHash"]) == expected_hash, "0x" + bytes(req["outputHash"]).hex()),
        Check("callback scored", async_pred == expected_class, f"predicted {async_pred}"),
        Check("precompile output", raw == model.encode_output(expected), f"{len(raw)} bytes"),
        Check("precompile scored", sync_pred == expected_class, f"predicted {sync_pred}"),
        Check("fee paid to the agreeing operators", paid == fee, f"{paid} of {fee} wei"),
    ]

    print(table(["path", "prediction", "label", "correct", "output hash"], [
        ["off-chain CVM", expected_class, label, expected_class == label, "0x" + expected_hash.hex()[:16] + "…"],
        ["oracle (2 of 3)", async_pred, label, async_pred == label, "0x" + bytes(req["outputHash"]).hex()[:16] + "…"],
        ["precompile", sync_pred, label, sync_won, "0x" + cvm.output_hash(model.decode_output(raw)).hex()[:16] + "…"],
    ], "lrrll"))
    print()
    print(table(["step", "gas", "note"], gas, "lrl"))
    print()
    print(table(["check", "result", "detail"], [[c.name, "ok" if c.ok else "FAILED", c.detail] for c in checks], "lll"))
    failed = [c.name for c in checks if not c.ok]
    print()
    print("demo: all checks passed" if not failed else f"demo: FAILED: {', '.join(failed)}")
    return 1 if failed else 0
