"""A batched k = 2 of 3 round on anvil, end to end and measured: BatchedOracle, DigitGame, the relay
(`python -m cvm.chain.relay`) and three `python -m cvm.chain.batch_node` processes on the committed
MNIST CNN and a real test image. The round is three transactions: the request, the committee's
three signed commits together, and the quorum's two openings together, which finalise and call
DigitGame back; the third member's opening follows in a transaction of its own (bond back, no fee).
Prints the gas of each and asserts the round is at most 400,000."""

from __future__ import annotations

import sys

import pytest
from chainkit import BACKEND, ROOT, chain_past
from test_chain_anvil import TIMEOUT, free_port, mnist_setup, running_anvil, wait_for
from web3.logs import DISCARD

import cvm
from cvm.chain import model_commitment
from cvm.chain.batch import StaleRound, deploy_batched_oracle, latest_round
from cvm.chain.contracts import OracleConfig, deploy, register_model, send
from cvm.chain.states import Status

pytestmark = [pytest.mark.chain, pytest.mark.anvil]

CONFIG = OracleConfig(quorum=2, committee_size=3, commit_window=600, reveal_window=600, withdrawal_delay=86_400)
ROUND_GAS_TARGET = 400_000  # issue 17, deliverable 4



def round_now(oracle, rid):
    """latest_round, or None while the live nodes' next transaction lands between its two reads (the
    stored word already new, its RoundUpdated log not yet seen): StaleRound then means 'not yet'."""
    try:
        return latest_round(oracle, rid)
    except StaleRound:
        return None

def test_a_batched_round_on_anvil_is_under_400k_gas(tmp_path, processes):
    with running_anvil(tmp_path) as (url, w3):
        deployer, op_keys, player, store, model, test = mnist_setup(tmp_path)
        x, label = model.quantize_input(test["x"][5:6]), int(test["y"][5])
        image, y = model.encode_input(x), model.run(x, backend="reference")

        dep = deploy_batched_oracle(w3, deployer, CONFIG)
        register_model(dep.registry, deployer, model)
        model_commitment.publish(w3, dep.registry, deployer, model)  # anvil: no trace precompile, nodes check it
        oracle = dep.oracle
        game, _ = deploy(w3, deployer, "DigitGame", oracle.address, model.hash, 10**15, 0, value=10**17)
        for k in op_keys:
            send(w3, k, oracle.functions.stake(), value=CONFIG.min_stake)

        port = free_port()
        logs = []

        def start(args, name, env=None):
            logs.append(tmp_path / f"{name}.log")
            processes.start([sys.executable, "-m", *args], logs[-1], env, cwd=ROOT)

        try:
            start(["cvm.chain.relay", "--port", str(port), "--rpc", url, "--oracle", oracle.address], "relay")
            for i, k in enumerate(op_keys):
                start(["cvm.chain.batch_node", "--rpc", url, "--key", "env:CVM_TEST_OPERATOR_KEY", "--oracle",
                       oracle.address, "--models", str(store.directory), "--db", str(tmp_path / f"op{i}.sqlite"),
                       "--backend", BACKEND, "--poll", "0.2", "--relay", f"http://127.0.0.1:{port}"],
                      f"op{i}", {"CVM_TEST_OPERATOR_KEY": k.key.hex()})
            request = send(w3, player, game.functions.play(image, label), value=oracle.functions.feeFor(model.hash).call())
            rid = game.events.GameStarted().process_receipt(request, errors=DISCARD)[0]["args"]["requestId"]
            committed = wait_for(lambda: (r := round_now(oracle, rid)) and len(r.committers) == 3 and r,
                                 "the committee's signed commits", timeout=TIMEOUT)
            chain_past(w3, committed.fields["commitDeadline"])  # seats are drawn until then; reveals open after
            wait_for(lambda: oracle.functions.statusOf(rid).call() == Status.FINALIZED, "the request to finalise",
                     timeout=TIMEOUT)
            final = wait_for(lambda: round_now(oracle, rid), "the final round's log", timeout=TIMEOUT)
            wait_for(lambda: (r := round_now(oracle, rid)) and all(r.revealed(i) for i in range(3)), "the late opening",
                     timeout=TIMEOUT)
        except AssertionError:
            print("\n".join(f"--- {p.name}\n{p.read_text()}" for p in logs))
            raise
        finally:
            processes.stop_all()  # every one signalled at once; killed if not gone by a generous deadline

        assert game.functions.wins(player.address).call() == 1
        played = game.events.GamePlayed().get_logs(from_block=0)
        assert played[0]["args"]["predicted"] == label
        assert bytes(oracle.events.Finalized().get_logs(from_block=0)[0]["args"]["outputHash"]) == cvm.output_hash(y)
        assert len(final.committers) == 3 and final.fields["agreedMask"].bit_count() == 2

        txs = sorted({e["transactionHash"] for e in oracle.events.RoundUpdated().get_logs(
            from_block=request["blockNumber"], argument_filters={"requestId": rid})} - {request["transactionHash"]},
            key=lambda t: (w3.eth.get_transaction_receipt(t)["blockNumber"],
                           w3.eth.get_transaction_receipt(t)["transactionIndex"]))
        receipts = [w3.eth.get_transaction_receipt(t) for t in txs]
        final_tx = oracle.events.Finalized().get_logs(from_block=request["blockNumber"])[0]["transactionHash"]
        upto = [r for r in receipts if r["blockNumber"] <= w3.eth.get_transaction_receipt(final_tx)["blockNumber"]]
        steps = [request["gasUsed"]] + [r["gasUsed"] for r in upto]
        later = [r["gasUsed"] for r in receipts[len(upto):]]
        print(f"\nBATCHED ANVIL ROUND GAS (k = 2 of 3, DigitGame callback): {sum(steps):,} "
              f"(request, signed commits, finalising openings: {steps}); the late opening after it: {later}")
        assert len(steps) == 3, "the round should be three transactions"
        assert sum(steps) <= ROUND_GAS_TARGET
        for k in op_keys:  # every bond back
            assert oracle.functions.operators(k.address).call()[3] == 0
