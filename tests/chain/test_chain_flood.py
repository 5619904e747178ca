"""Throughput on a real JSON-RPC node: 150 requests arriving in 15 s at anvil, three
`python -m cvm.chain.node` processes, one killed with SIGKILL in the middle of the flood and
restarted at once. Every request finalises with the right output, and no operator sent a transaction
twice or lost one: each operator's nonce is exactly its stake, its commits and its reveals (a
duplicate or a reverted transaction would show as one more), and every commit was revealed.

A throughput measurement, not a correctness check: whether 150 requests finalise inside the 30 s
windows depends on how busy the machine is, so it runs only when asked (CVM_FLOOD=1); the pipelining and
restart properties it also shows are tested on every run in test_chain_node.py
(test_requests_are_pipelined, the crash-at-broadcast tests).

    CVM_FLOOD=1 .venv/bin/python -m pytest -q -s tests/chain/test_chain_flood.py   # the FLOOD line docs/chain.md quotes"""

from __future__ import annotations

import os
import statistics
import time

import pytest
from test_chain_anvil import Operators, mnist_setup, running_anvil, wait_for

import cvm
from cvm.chain import model_commitment
from cvm.chain.contracts import OracleConfig, deploy_oracle, register_model, send
from cvm.chain.node import Status

pytestmark = [pytest.mark.chain, pytest.mark.anvil, pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("CVM_FLOOD") != "1",
                                 reason="a throughput measurement that depends on the machine's load: CVM_FLOOD=1")]

REQUESTS, SECONDS = 150, 15.0
CONFIG = OracleConfig(quorum=2, committee_size=3, slash_amount=10**16, commit_window=30, reveal_window=30,
                      max_challenge_window=60, dispute_move_time=30, withdrawal_delay=86_400)
STAKE = 10 * 10**18  # 1,000 bonds: every request can be in flight at once
GWEI = 10**9


def send_requests(w3, player, oracle, model_hash: bytes, inputs: list[bytes], fee: int, on_half) -> list[bytes]:
    """Signs and broadcasts the requests at an even rate over SECONDS, waiting for no receipt (a
    client that pipelines too); calls on_half() once half are out. Returns the transaction hashes."""
    call = oracle.functions.request(model_hash, inputs[0], player.address)
    gas = int(call.estimate_gas({"from": player.address, "value": fee}) * 1.5)
    nonce, chain_id = w3.eth.get_transaction_count(player.address), w3.eth.chain_id
    hashes, start = [], time.monotonic()
    for i, data in enumerate(inputs):
        time.sleep(max(0.0, start + i * SECONDS / len(inputs) - time.monotonic()))
        tx = oracle.functions.request(model_hash, data, player.address).build_transaction(
            {"from": player.address, "value": fee, "gas": gas, "nonce": nonce + i, "chainId": chain_id,
             "maxFeePerGas": 50 * GWEI, "maxPriorityFeePerGas": GWEI})
        hashes.append(bytes(w3.eth.send_raw_transaction(player.sign_transaction(tx).raw_transaction)))
        if i == len(inputs) // 2:
            on_half()
    return hashes


@pytest.fixture
def anvil(tmp_path):
    """anvil sealing a block each second, as a chain does: automining would put each of the ~600
    transactions in its own block, and a request whose block is 256 blocks old can no longer be
    committed to (its seed's blockhash is gone: SeedUnavailable)."""
    with running_anvil(tmp_path, "--block-time", "1") as chain:
        yield chain


def events_by(oracle, name: str, operator: str) -> list:
    return getattr(oracle.events, name)().get_logs(from_block=0, argument_filters={"operator": operator})


def test_150_requests_in_15_seconds_with_a_kill(anvil, tmp_path):
    url, w3 = anvil
    deployer, op_keys, player, store, model, test = mnist_setup(tmp_path)
    xs = [model.quantize_input(test["x"][i % len(test["x"])][None]) for i in range(REQUESTS)]
    inputs = [model.encode_input(x) for x in xs]
    expected = [cvm.output_hash(model.run(x, backend="reference")) for x in xs]

    dep = deploy_oracle(w3, deployer, CONFIG)
    oracle = dep.oracle
    register_model(dep.registry, deployer, model)
    model_commitment.publish(w3, dep.registry, deployer, model)  # anvil: no trace precompile, nodes check it
    for k in op_keys:
        send(w3, k, oracle.functions.stake(), value=STAKE)
    ops = Operators(tmp_path, url, oracle.address, store.directory, op_keys)
    try:
        for i in range(3):
            ops.start(i)
        wait_for(lambda: all("watching oracle" in p.read_text() for p in tmp_path.glob("op*.1.log"))
                 and len(list(tmp_path.glob("op*.1.log"))) == 3, "the operators to start", timeout=120)

        def kill_and_restart():
            ops.kill(0)
            ops.start(0)

        first = w3.eth.block_number + 1
        t0 = time.monotonic()
        hashes = send_requests(w3, player, oracle, model.hash, inputs, oracle.functions.feeFor(model.hash).call(),
                               kill_and_restart)
        sent_in = time.monotonic() - t0
        receipts = [w3.eth.wait_for_transaction_receipt(h, timeout=60) for h in hashes]
        assert all(r["status"] == 1 for r in receipts)
        rids = [oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"] for r in receipts]
        wait_for(lambda: all(oracle.functions.statusOf(r).call() != Status.PENDING for r in rids),
                 "every request to finalise", timeout=CONFIG.commit_window + CONFIG.reveal_window + 120, interval=1.0)
        all_final_in = time.monotonic() - t0
        # the nodes close their requests once every committer revealed: wait for the last reveals
        wait_for(lambda: all(oracle.functions.getRequest(r).call()[4] == oracle.functions.getRequest(r).call()[3]
                             for r in rids), "every commit to be revealed", timeout=CONFIG.reveal_window + 60,
                 interval=1.0)
    except AssertionError:
        ops.stop_all()
        print(ops.logs()[-20_000:])
        raise
    finally:
        ops.stop_all()

    states = [oracle.functions.getRequest(r).call() for r in rids]
    statuses = [Status(s[5]) for s in states]
    assert statuses == [Status.FINALIZED] * REQUESTS, ops.logs()[-20_000:]
    finalized = {e["args"]["requestId"]: e for e in oracle.events.Finalized().get_logs(from_block=first)}
    assert [bytes(finalized[r]["args"]["outputHash"]) for r in rids] == expected

    counts = []
    for k in op_keys:
        commits, reveals = events_by(oracle, "Committed", k.address), events_by(oracle, "Revealed", k.address)
        assert {e["args"]["requestId"] for e in commits} == {e["args"]["requestId"] for e in reveals}
        assert len({e["args"]["requestId"] for e in commits}) == len(commits)
        # nothing else was sent: no duplicate, no reverted transaction, no settle needed
        assert w3.eth.get_transaction_count(k.address) == 1 + len(commits) + len(reveals), ops.logs()[-20_000:]
        assert oracle.functions.operators(k.address).call()[0] == STAKE  # never slashed
        counts.append(len(commits))

    def stamp(block: int) -> int:
        return w3.eth.get_block(block)["timestamp"]

    latency = [stamp(finalized[r]["blockNumber"]) - stamp(rc["blockNumber"]) for r, rc in zip(rids, receipts)]
    print(f"\nFLOOD: {REQUESTS} requests sent in {sent_in:.1f} s; all finalised {all_final_in:.1f} s after the "
          f"first; request-to-final latency median {statistics.median(latency):.0f} s, max {max(latency)} s; "
          f"commits per operator {counts} (operator 0 killed and restarted after request {REQUESTS // 2}); "
          f"windows {CONFIG.commit_window}/{CONFIG.reveal_window} s; blocks {first}..{w3.eth.block_number}")
