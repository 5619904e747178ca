"""Integration against a real JSON-RPC node: anvil (from the npm package @foundry-rs/anvil) on
127.0.0.1, three `python -m cvm.chain.node` operator processes, one killed with SIGKILL in the
middle of a request and restarted, and the request still finalised with the right output.
The model is the committed MNIST CNN, the input a real test image."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from chainkit import BACKEND, ROOT, past_commit_deadline
import testprocs
from testprocs import Processes, die_with_parent
from eth_account import Account
from web3 import Web3
from web3.logs import DISCARD

import cvm
from cvm.chain import model_commitment
from cvm.chain.contracts import OracleConfig, TxFailed, call_struct, deploy, deploy_oracle, register_model, send
from cvm.chain.node import Status
from cvm.chain.store import ModelStore

pytestmark = [pytest.mark.chain, pytest.mark.anvil]

MNEMONIC = "test test test test test test test test test test test junk"  # anvil's default accounts
CONFIG = OracleConfig(quorum=3, committee_size=3, commit_window=600, reveal_window=600,
                      withdrawal_delay=86_400)  # all three must agree: the killed one is needed
TIMEOUT = 300  # seconds for any one phase (operators start Python, load and compile the model)


def anvil_binary() -> Path:
    found = sorted((ROOT / "contracts" / "node_modules" / "@foundry-rs").glob("anvil-*/bin/anvil"))
    assert found, "anvil is missing: run scripts/setup.sh (npm ci in contracts/)"
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what: str, timeout: float = TIMEOUT, interval: float = 0.2):
    """testprocs.wait_for with this file's phase deadline."""
    return testprocs.wait_for(predicate, what, deadline=timeout, interval=interval)


@contextlib.contextmanager
def running_anvil(tmp_path, *extra: str):
    """anvil on a free port (automining unless `extra` says otherwise); yields (url, w3)."""
    port = free_port()
    with open(tmp_path / "anvil.log", "w") as log:
        proc = subprocess.Popen(
            [str(anvil_binary()), "--host", "127.0.0.1", "--port", str(port), "--hardfork", "prague",
             "--mnemonic", MNEMONIC, "--accounts", "10", "--chain-id", "31337", *extra],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=die_with_parent)
    url = f"http://127.0.0.1:{port}"
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 10}))
    try:
        wait_for(lambda: proc.poll() is None and w3.is_connected(), "anvil to listen")
        yield url, w3
    finally:
        Processes().stop(proc)  # SIGTERM, then SIGKILL if it is not gone by a generous deadline


@pytest.fixture
def anvil(tmp_path):
    with running_anvil(tmp_path) as chain:
        yield chain


class Operators:
    """Operator subprocesses, each started and ended by its own pid."""

    def __init__(self, tmp_path: Path, url: str, oracle: str, models: Path, keys: list):
        self.tmp_path, self.url, self.oracle, self.models, self.keys = tmp_path, url, oracle, models, keys
        self.procs: dict[int, subprocess.Popen] = {}
        self.starts = [0] * len(keys)

    def start(self, i: int) -> None:
        self.starts[i] += 1
        env = {**os.environ, "CVM_TEST_OPERATOR_KEY": self.keys[i].key.hex()}
        with open(self.tmp_path / f"op{i}.{self.starts[i]}.log", "w") as log:
            self.procs[i] = subprocess.Popen(
                [sys.executable, "-m", "cvm.chain.node", "--rpc", self.url, "--key", "env:CVM_TEST_OPERATOR_KEY",
                 "--oracle", self.oracle, "--models", str(self.models), "--db", str(self.tmp_path / f"op{i}.sqlite"),
                 "--backend", BACKEND, "--poll", "0.2"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)

    def kill(self, i: int) -> None:
        os.kill(self.procs[i].pid, signal.SIGKILL)
        self.procs[i].wait()

    def stop_all(self) -> None:
        """Signals every operator before waiting for any (a slow one delays no other's signal)."""
        live = Processes()
        live.procs = list(self.procs.values())
        live.stop_all()

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(self.tmp_path.glob("op*.log")))


def mnist_setup(tmp_path):
    """What the anvil tests with live nodes share: anvil's first five accounts as (deployer, three
    operators, player), a model store holding the MNIST CNN fixture, the model and its test data."""
    Account.enable_unaudited_hdwallet_features()
    keys = [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(5)]
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(ROOT / "fixtures/models/mnist_cnn.cvm"))
    return keys[0], keys[1:4], keys[4], store, model, np.load(ROOT / "fixtures/data/mnist_cnn_test.npz")


def test_operators_on_anvil_survive_a_kill(anvil, tmp_path):
    url, w3 = anvil
    deployer, op_keys, player, store, model, test = mnist_setup(tmp_path)
    x, label = model.quantize_input(test["x"][5:6]), int(test["y"][5])
    image, y = model.encode_input(x), model.run(x, backend="reference")
    assert int(np.argmax(y[0])) == label

    dep = deploy_oracle(w3, deployer, CONFIG)
    register_model(dep.registry, deployer, model)
    model_commitment.publish(w3, dep.registry, deployer, model)  # anvil: no trace precompile, nodes check it
    game, _ = deploy(w3, deployer, "DigitGame", dep.oracle.address, model.hash, 10**15, 0, value=10**17)
    for k in op_keys:
        send(w3, k, dep.oracle.functions.stake(), value=CONFIG.min_stake)

    # the contracts compiled for prague run on this anvil; it has no CVM precompile
    with pytest.raises(TxFailed) as e:
        send(w3, player, game.functions.playNow(image, 0))
    assert e.value.error == "CVMUnavailable"

    ops = Operators(tmp_path, url, dep.oracle.address, store.directory, op_keys)
    oracle = dep.oracle
    try:
        ops.start(0)
        r = send(w3, player, game.functions.play(image, label), value=dep.oracle.functions.feeFor(model.hash).call())
        rid = game.events.GameStarted().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]

        def submission(i):
            return call_struct(oracle.functions.getSubmission(rid, op_keys[i].address))

        # operator 0 commits, then waits for the reveal phase: kill it there
        wait_for(lambda: submission(0)["commitment"] != bytes(32), "operator 0 to commit")
        ops.kill(0)

        ops.start(1)
        ops.start(2)
        wait_for(lambda: all(submission(i)["commitment"] != bytes(32) for i in (1, 2)), "operators 1 and 2 to commit")
        past_commit_deadline(w3, oracle, rid)  # seats are drawn until the deadline: the reveals open after it
        wait_for(lambda: all(submission(i)["vote"] != bytes(32) for i in (1, 2)), "operators 1 and 2 to reveal")
        assert call_struct(oracle.functions.getRequest(rid))["status"] == Status.PENDING  # 2 of 3 agree

        ops.start(0)  # restarted: finds its salt in SQLite and its commitment on chain, reveals
        state = wait_for(lambda: (s := call_struct(oracle.functions.getRequest(rid)))["status"] != Status.PENDING
                         and s, "the request to finalise")
        # the chain can finalise before the restarted operator has logged its receipt: wait for its verdict
        restarted_log = tmp_path / "op0.2.log"
        wait_for(lambda: f"request {rid}: done:" in restarted_log.read_text(), "operator 0 to close the request")
    except AssertionError:
        ops.stop_all()
        print(ops.logs())
        raise
    finally:
        ops.stop_all()

    assert state["status"] == Status.FINALIZED, ops.logs()
    assert bytes(state["outputHash"]) == cvm.output_hash(y)
    assert state["reveals"] == 3
    played = game.events.GamePlayed().get_logs(from_block=0)
    assert played and played[0]["args"]["predicted"] == label
    assert game.functions.wins(player.address).call() == 1
    # operator 0 sent one commit and one reveal (after its stake), nothing twice
    assert w3.eth.get_transaction_count(op_keys[0].address) == 3
    for k in op_keys:
        assert oracle.functions.claimable(k.address).call() > 0
        assert oracle.functions.operators(k.address).call()[0] == CONFIG.min_stake
    log0 = restarted_log.read_text()
    assert f"request {rid}: revealed" in log0 and f"request {rid}: committed" not in log0
    assert f"request {rid}: done: finalised with our output" in log0

    steps = round_gas(w3, oracle, r, rid)
    print(f"ANVIL ROUND GAS (k = {CONFIG.quorum} of {CONFIG.committee_size}): {sum(steps):,} "
          f"(request, commits, reveals up to the finalising one: {steps})")
    assert sum(steps) < 1_087_388  # the round before the gas cuts (embedded chain, docs/chain.md)


def round_gas(w3, oracle, request_receipt, rid: int) -> list[int]:
    """Gas used by a round on this chain: the request, every commit, and the reveals up to and
    including the one that finalised (later reveals are not part of the round)."""
    def logs(event):
        return sorted((e for e in event.get_logs(from_block=request_receipt["blockNumber"])
                       if e["args"]["requestId"] == rid), key=lambda e: (e["blockNumber"], e["logIndex"]))

    final_tx = logs(oracle.events.Finalized())[0]["transactionHash"]
    reveals = [e["transactionHash"] for e in logs(oracle.events.Revealed())]
    txs = [e["transactionHash"] for e in logs(oracle.events.Committed())] + reveals[:reveals.index(final_tx) + 1]
    return [request_receipt["gasUsed"]] + [w3.eth.get_transaction_receipt(t)["gasUsed"] for t in txs]
