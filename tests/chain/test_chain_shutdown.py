"""The long-running processes stop on the first SIGTERM, whatever they are doing, and a restart resumes
from SQLite: a `python -m cvm.chain.node` stopped while idle and then after every step of a request
(anvil mines a block only between two runs, so each run stops with its transaction pending)
finishes the request with no transaction sent twice; a `python -m cvm.chain.batch_node` stopped while
it retries a dead chain, and its relay."""

from __future__ import annotations

import contextlib
import re
import sqlite3
import sys

import numpy as np
import pytest
from chainkit import BACKEND, ROOT, tiny_model
from eth_account import Account
from test_chain_anvil import MNEMONIC, free_port, running_anvil
from testprocs import wait_for, wait_for_line

from cvm.chain import model_commitment
from cvm.chain.batch import deploy_batched_oracle
from cvm.chain.contracts import OracleConfig, deploy_oracle, register_model, send
from cvm.chain.states import COMMITTED, REVEALED, Status
from cvm.chain.store import ModelStore

pytestmark = [pytest.mark.chain, pytest.mark.anvil]

QUICK = 20.0  # seconds from SIGTERM to exit: shutdown.GRACE (5 s) and a loaded machine's slack
CONFIG = OracleConfig(quorum=1, committee_size=1, commit_window=600, reveal_window=600, withdrawal_delay=86_400)
STEP = re.compile(r"request \d+: ")  # a node's log line for one step of a request
PAST = {COMMITTED: CONFIG.commit_window + 1,  # a state's wait in chain time: past it, the node moves on
        REVEALED: CONFIG.reveal_window + CONFIG.max_challenge_window + 1}
MAX_RUNS = 12  # a request takes about 8 steps: one run each, and some to spare


def anvil_keys(n: int) -> list:
    Account.enable_unaudited_hdwallet_features()
    return [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(n)]


def node_argv(module: str, url: str, oracle: str, models, db, *extra: str) -> list[str]:
    return [sys.executable, "-m", module, "--rpc", url, "--key", "env:CVM_TEST_OPERATOR_KEY", "--oracle", oracle,
            "--models", str(models), "--db", str(db), "--backend", BACKEND, "--poll", "0.2", *extra]


def stop_quickly(processes, proc, log) -> None:
    took = processes.stop(proc)
    text = log.read_text()
    assert took < QUICK, f"{log.name}: exit took {took:.1f} s after SIGTERM:\n{text[-4000:]}"
    assert proc.returncode == 0 and re.search(r"stopped$", text, re.M), f"{log.name}:\n{text[-4000:]}"


def test_a_node_stops_at_every_step_and_resumes_from_sqlite(tmp_path, processes):
    deployer, operator, player = anvil_keys(3)
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(tiny_model()))
    with running_anvil(tmp_path) as (url, w3):
        dep = deploy_oracle(w3, deployer, CONFIG)
        register_model(dep.registry, deployer, model)
        model_commitment.publish(w3, dep.registry, deployer, model)  # anvil: no trace precompile, nodes check it
        send(w3, operator, dep.oracle.functions.stake(), value=CONFIG.min_stake)
        argv = node_argv("cvm.chain.node", url, dep.oracle.address, store.directory, tmp_path / "node.sqlite")
        env = {"CVM_TEST_OPERATOR_KEY": operator.key.hex()}

        log = tmp_path / "node.0.log"
        proc = processes.start(argv, log, env, cwd=ROOT)  # idle: watching an oracle with no request
        wait_for_line(log, "watching oracle", proc=proc)
        stop_quickly(processes, proc, log)

        rid = request(w3, dep.oracle, player, model, np.array([[5, -3, 7, 1]], dtype=np.int8))
        advanced, db = set(), tmp_path / "node.sqlite"
        w3.provider.make_request("evm_setAutomine", [False])  # blocks when the test says: a step per run
        for run in range(1, MAX_RUNS + 1):  # stopped at its first step of each run
            log = tmp_path / f"node.{run}.log"
            proc = processes.start(argv, log, env, cwd=ROOT)
            wait_for_line(log, STEP.pattern, proc=proc)
            stop_quickly(processes, proc, log)
            if "done:" in log.read_text():
                break
            state = query(db, "SELECT state FROM requests WHERE request_id = ?", rid)[0][0]
            wait = PAST.get(state, 1) if state not in advanced else 1  # past what the protocol waits for
            advanced.add(state)
            advance(w3, wait)  # one block: the transaction the node left pending is mined now
        logs = "".join(p.read_text() for p in sorted(tmp_path.glob("node.*.log")))
        assert "done: finalised with our output" in logs, logs[-6000:]
        assert dep.oracle.functions.statusOf(rid).call() == Status.FINALIZED
        mined = [kind for kind, in query(db, "SELECT kind FROM txs WHERE state = 'mined' ORDER BY nonce")]
        assert mined[:2] == ["commit", "reveal"] and len(set(mined)) == len(mined), mined  # none sent twice
        assert w3.eth.get_transaction_count(operator.address) == 1 + len(mined), logs[-6000:]  # the stake, then these


def query(db, sql: str, *args) -> list[tuple]:
    """The stopped node's SQLite rows (the node keeps its whole state there)."""
    with contextlib.closing(sqlite3.connect(db)) as c:
        return c.execute(sql, args).fetchall()


def advance(w3, seconds: int) -> None:
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def request(w3, oracle, player, model, x) -> int:
    r = send(w3, player, oracle.functions.request(model.hash, model.encode_input(x), player.address),
             value=oracle.functions.feeFor(model.hash).call())
    return oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]


def test_a_batched_node_and_its_relay_stop_while_the_chain_is_dead(tmp_path, processes):
    deployer, operator = anvil_keys(2)
    port = free_port()
    relay_log, node_log = tmp_path / "relay.log", tmp_path / "node.log"
    relay = processes.start([sys.executable, "-m", "cvm.chain.relay", "--port", str(port), "--rpc",
                             "http://127.0.0.1:9", "--oracle", "0x" + "00" * 19 + "01"], relay_log, cwd=ROOT)
    with running_anvil(tmp_path) as (url, w3):
        dep = deploy_batched_oracle(w3, deployer, CONFIG)
        argv = node_argv("cvm.chain.batch_node", url, dep.oracle.address, tmp_path, tmp_path / "node.sqlite",
                         "--relay", f"http://127.0.0.1:{port}")
        node = processes.start(argv, node_log, {"CVM_TEST_OPERATOR_KEY": operator.key.hex()}, cwd=ROOT)
        wait_for_line(node_log, "watching oracle", proc=node)
    wait_for_line(node_log, "will retry", proc=node)  # anvil is gone: the node retries it
    stop_quickly(processes, node, node_log)
    wait_for(lambda: "relay listening" in relay_log.read_text(), "the relay to listen")
    took = processes.stop(relay)
    assert took < QUICK and relay.returncode == 0 and "relay stopped" in relay_log.read_text()
