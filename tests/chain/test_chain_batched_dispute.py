"""One honest batched node against a colluding majority of its committee (BatchedOracle, k = 2 of 3).

Three cvm/chain/batch_node.py operators share a relay (cvm/chain/relay.py, in process): two colluders
run the same node code but commit to, reveal and defend a forged trace and output of the MNIST CNN
(one tensor in the middle of the graph and the output moved by one); their aggregator submits their
two agreeing openings together. The honest node reveals its own output, sees the forged vote, opens
the dispute (BatchedOracle.openDispute with the round) and plays DisputeGame with disputant.py's
player: the bisection reaches the forged tensor and the step is re-executed on chain, by the trace
precompile on the embedded chain and by the Solidity referee (down to one element) on anvil. Both
colluders are slashed, half of each bond goes to the honest node, and after the challenge window the
honest output is final. With window 0 (the fast path that trusts the majority) the forged result is
delivered, but its voters are slashed all the same.

Also: a batched node never signs more commits than its free bond covers, counting the commits it
signed that are not on chain yet."""

from __future__ import annotations

import os

import numpy as np
import pytest
from chainkit import BACKEND, CONFIG, ROOT, Env
from eth_account import Account
from test_chain_anvil import MNEMONIC, running_anvil
from test_chain_batched import batched_env
from test_chain_referee import FORGED_LEAF, forged

import cvm
from cvm.chain import model_commitment as mc
from cvm.chain import relay
from cvm.chain.batch import deploy_batched_oracle, latest_round
from cvm.chain.batch_node import BatchedOperator
from cvm.chain.contracts import call_struct, register_model, send
from cvm.chain.disputant import Phase
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.states import DONE, Status
from cvm.chain.store import ModelStore
from cvm.chain.trace import run_trace

pytestmark = pytest.mark.chain
CNN = ROOT / "fixtures/models/mnist_cnn.cvm"
WINDOW = 300  # the consumer's challenge window
TICK = 5  # seconds the clock moves between two steps of the committee


class Colluder(BatchedOperator):
    """A member that commits to, reveals and defends the forged trace (FORGED_LEAF and the output
    changed) instead of computing: both colluders forge the same one."""

    def trace(self, job, model=None):
        if job.request_id not in self._traces:
            model = model or self.store.get(job.model_hash)
            self._traces[job.request_id] = forged(run_trace(model, model.decode_input(job.input)), FORGED_LEAF)
        return self._traces[job.request_id]

    def _compute(self, job):
        t = self.trace(job)
        self._update(job, output=t.model.encode_output(t.output), output_hash=cvm.output_hash(t.output),
                     trace_root=t.root, salt=os.urandom(32))
        return True


@pytest.fixture
def board():
    """board(w3, oracle) -> the URL of a relay (in process) serving that oracle; stopped after the test."""
    servers = []

    def start(w3, oracle) -> str:
        servers.append(relay.serve(w3, [oracle.address], port=0))
        return f"http://127.0.0.1:{servers[-1].server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def committee(w3, keys, oracle, store, tmp_path, url):
    """Two colluders and one honest node, in seat order of nothing: the draw and the relay decide."""
    make = lambda cls, i: cls(w3, keys[i], oracle.address, store, tmp_path / f"op{i}.sqlite",  # noqa: E731
                              backend=BACKEND, retry_delay=0.0, relay=url)
    return make(Colluder, 0), make(Colluder, 1), make(BatchedOperator, 2)


def drive(ops, advance, done, steps=400):
    """Steps every node, then moves the clock TICK seconds, until `done()`."""
    for _ in range(steps):
        for op in ops:
            op.step()
        if done():
            return
        advance(TICK)
    raise AssertionError("the round did not close")


def play_round(w3, oracle, model, ops, player, advance, window):
    """A request with the challenge window, driven to the end; returns (request id, honest node's vote)."""
    test = np.load(ROOT / "fixtures/data/mnist_cnn_test.npz")
    x = model.encode_input(model.quantize_input(test["x"][3:4]))
    call = oracle.functions.requestWithWindow(model.hash, x, player.address, window) if window else \
        oracle.functions.request(model.hash, x, player.address)
    r = send(w3, player, call, value=oracle.functions.feeFor(model.hash).call(), gas=2_000_000)
    rid = oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    drive(ops, advance, lambda: all(op.job(rid) is not None and op.job(rid).state == DONE for op in ops))
    return rid


def check_outcome(w3, oracle, ops, rid, window):
    liar_a, liar_b, honest = ops
    game = honest.disputant.game
    resolved = game.events.DisputeResolved().get_logs(from_block=0)
    opened_logs = oracle.events.DisputeOpened().get_logs(from_block=0)
    # the honest node disputes the forged vote once; each colluder may dispute the honest vote too (one
    # game per pair of players), and every game ends with the colluder's side wrong
    assert len(resolved) == len(opened_logs) <= 3, resolved
    for log_ in resolved:
        d = call_struct(game.functions.getDispute(log_["args"]["disputeId"]))
        assert d["phase"] == Phase.RESOLVED and d["index"] == FORGED_LEAF  # bisected to the forged tensor
        honest_challenger = d["challenger"] == honest.account.address
        assert (log_["args"]["challengerWrong"], log_["args"]["defenderWrong"]) == \
            ((False, True) if honest_challenger else (True, False))
    gas = lambda log: w3.eth.get_transaction_receipt(log["transactionHash"])["gasUsed"]  # noqa: E731
    print(f"\nbatched openDispute {gas(opened_logs[0]):,} gas; the move that resolved it (slashing both colluders) "
          f"{gas(resolved[0]):,} gas")
    honest_challenged = opened_logs[0]["args"]["challenger"] == honest.account.address

    stake = lambda op: oracle.functions.operators(op.account.address).call()[0]  # noqa: E731
    bond = CONFIG.slash_amount
    assert stake(liar_a) == stake(liar_b) == CONFIG.min_stake - bond  # both colluders slashed, once
    assert stake(honest) == CONFIG.min_stake
    for op in ops:  # every bond released
        assert oracle.functions.operators(op.account.address).call()[3] == 0
    r = latest_round(oracle, rid)
    assert r.status == Status.FINALIZED and r.fields["settled"]  # finalize (window), or the honest node's settle
    honest_vote = r.vote_of(honest.account.address)
    assert oracle.functions.refuted(rid, r.vote_of(liar_a.account.address)).call()
    assert not oracle.functions.refuted(rid, honest_vote).call()
    if window:  # the honest output is final, the honest node paid
        assert r.result() == honest_vote
        assert honest.job(rid).note == "finalised with our output"
    else:  # the fast path delivered the majority's forgery; its voters lost their bonds all the same
        assert r.result() == r.vote_of(liar_a.account.address)
    return honest_challenged


def embedded_env(tmp_path) -> Env:
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(CNN))
    chain = EmbeddedChain(store, backend="reference", num_accounts=10)
    dep = deploy_batched_oracle(chain.w3, chain.keys[0], CONFIG)
    register_model(dep.registry, chain.keys[0], model)
    e = Env(chain, store, model, dep, CONFIG)
    e.stake_all(3)
    return e


@pytest.mark.parametrize("window", [WINDOW, 0])
def test_one_honest_batched_node_beats_a_colluding_majority(tmp_path, board, window):
    if not CNN.exists():
        pytest.skip(f"{CNN} is not committed")
    env = embedded_env(tmp_path)
    ops = committee(env.w3, env.operators, env.oracle, env.store, tmp_path, board(env.w3, env.oracle))
    rid = play_round(env.w3, env.oracle, env.model, ops, env.player, env.chain.advance_time, window)
    check_outcome(env.w3, env.oracle, ops, rid, window)


@pytest.mark.anvil
def test_one_honest_batched_node_beats_a_colluding_majority_on_anvil(tmp_path, board):
    """No trace precompile: the game goes on inside the forged tensor and Referee.sol recomputes one
    element; the model's referee commitment is published by its author."""
    if not CNN.exists():
        pytest.skip(f"{CNN} is not committed")
    with running_anvil(tmp_path) as (url, w3):
        Account.enable_unaudited_hdwallet_features()
        keys = [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(5)]
        deployer, op_keys, player = keys[0], keys[1:4], keys[4]
        store = ModelStore(tmp_path / "models")
        model = store.get(store.put(CNN))
        dep = deploy_batched_oracle(w3, deployer, CONFIG)
        register_model(dep.registry, deployer, model)
        mc.publish(w3, dep.registry, deployer, model)
        for k in op_keys:
            send(w3, k, dep.oracle.functions.stake(), value=CONFIG.min_stake)

        def advance(seconds):
            w3.provider.make_request("evm_increaseTime", [seconds])
            w3.provider.make_request("evm_mine", [])

        ops = committee(w3, op_keys, dep.oracle, store, tmp_path, board(w3, dep.oracle))
        rid = play_round(w3, dep.oracle, model, ops, player, advance, WINDOW)
        check_outcome(w3, dep.oracle, ops, rid, WINDOW)
        game = ops[2].disputant.game
        d = game.functions.getDispute(game.events.DisputeResolved().get_logs(from_block=0)[0]["args"]["disputeId"])
        assert d.call()[-6]  # the referee judged it


def test_signed_commits_count_against_the_free_bond(tmp_path, board):
    """A stake of 2.5 bonds and three requests: the node signs two commits and posts them (the rest of
    the committee is silent, so they stay on the relay), and signs no third one while those two may
    still land; once the first request's commit deadline passes unsubmitted, its bond is free again
and the third request gets it."""
    env = batched_env(tmp_path)
    store, model, chain = env.store, env.model, env.chain
    assert CONFIG.min_stake // CONFIG.slash_amount == 2
    node = BatchedOperator(env.w3, env.operators[0], env.oracle.address, store, tmp_path / "op0.sqlite",
                           backend=BACKEND, retry_delay=0.0, relay=board(env.w3, env.oracle))
    rids = []
    for i in range(3):
        r = env.send(env.player, env.oracle.functions.request(model.hash, bytes([i, 2, 3, 4]), env.player.address),
                     value=env.fee)
        rids.append(env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"])
        chain.advance_time(10)  # the requests' commit deadlines are 10 s apart
    node.step()
    node.step()
    posted = [node._board(rid)["commits"] for rid in rids]
    assert [len(p) for p in posted] == [1, 1, 0]  # two signed, none for the third: no bond left for it
    assert env.oracle.functions.operators(env.operators[0].address).call()[3] == 0  # nothing on chain yet
    assert node.signed_pending(chain.timestamp()) == 2

    first_deadline = latest_round(env.oracle, rids[0]).fields["commitDeadline"]
    chain.advance_time(first_deadline - chain.timestamp() + 1)  # the first signed commit can no longer land
    node.step()
    node.step()  # (this close to their deadlines the node commits alone, on chain)
    mine = env.operators[0].address
    assert node.job(rids[0]).state == DONE  # commit phase closed
    assert latest_round(env.oracle, rids[1]).committers == [mine]
    assert latest_round(env.oracle, rids[2]).committers == [mine]  # the first's bond covered the third
    assert env.oracle.functions.operators(mine).call()[3] == 2 * CONFIG.slash_amount


def test_an_honest_node_without_a_seat_beats_a_colluding_committee(tmp_path, board):
    """Issue 27: the two colluders hold every seat of a request with a window; the honest node staked
    only after the request (so it is not drawn) and watches it (cvm/chain/watch.py): it computes the
    request, challenges the forged vote with its own claim and bond, wins by re-execution on the
    embedded chain (trace precompile), and finalises its output after the window: paid the fee and
    half of each colluder's bond, its challenge bond back."""
    if not CNN.exists():
        pytest.skip(f"{CNN} is not committed")
    env = embedded_env(tmp_path)  # operators 0..2 staked; 0 and 1 collude, 2 stays out of this request
    url = board(env.w3, env.oracle)
    colluders = committee(env.w3, env.operators, env.oracle, env.store, tmp_path, url)[:2]
    honest = BatchedOperator(env.w3, env.operators[3], env.oracle.address, env.store, tmp_path / "op3.sqlite",
                             backend=BACKEND, retry_delay=0.0, relay=url)
    env.send(env.operators[2], env.oracle.functions.requestUnstake())  # out of the draw
    test = np.load(ROOT / "fixtures/data/mnist_cnn_test.npz")
    x = env.model.encode_input(env.model.quantize_input(test["x"][3:4]))
    r = send(env.w3, env.player, env.oracle.functions.requestWithWindow(env.model.hash, x, env.player.address, WINDOW),
             value=env.oracle.functions.feeFor(env.model.hash).call(), gas=2_000_000)
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    env.send(env.operators[3], env.oracle.functions.stake(), value=CONFIG.min_stake)  # after the request: no seat
    ops = [*colluders, honest]
    drive(ops, env.chain.advance_time, lambda: all(op.job(rid) is not None and op.job(rid).state == DONE
                                                   for op in ops))
    final = latest_round(env.oracle, rid)
    assert sorted(final.committers) == sorted(c.account.address for c in colluders)  # every seat colluding
    assert final.status == Status.FINALIZED
    assert bytes(env.oracle.events.Finalized().get_logs(from_block=0)[0]["args"]["outputHash"]) == \
        cvm.output_hash(env.model.run(env.model.decode_input(x), backend="reference"))
    assert honest.job(rid).note == "watched: finalised with our output"
    challenged = env.oracle.events.DisputeOpened().get_logs(from_block=0)
    assert challenged and all(e["args"]["challenger"] == env.operators[3].address or
                              e["args"]["defender"] == env.operators[3].address for e in challenged
                              if e["args"]["challenger"] not in [c.account.address for c in colluders])
    stake = lambda a: env.oracle.functions.operators(a).call()  # noqa: E731
    assert all(stake(c.account.address)[0] == CONFIG.min_stake - CONFIG.slash_amount for c in colluders)
    assert stake(env.operators[3].address)[3] == 0  # its challenge bonds back
    assert env.oracle.functions.claimable(env.operators[3].address).call() >= CONFIG.slash_amount
