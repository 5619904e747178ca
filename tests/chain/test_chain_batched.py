"""BatchedOracle on the embedded chain: a round in three transactions (request, the committee's signed
commits together, the reveals together), and what keeps it safe: forged, replayed or duplicated
signatures and stale rounds are refused, a member left out by the aggregator commits and reveals
alone, nobody can reveal another's answer as its own, silence is slashed at settle, and the dispute
game refutes a vote of a batched round and slashes its revealers."""

from __future__ import annotations

import os

import pytest
from chainkit import CONFIG, NO_TRACE, Env, reverts, tiny_model
from eth_account import Account
from web3 import Web3
from web3.logs import DISCARD

import cvm
from cvm.chain.batch import (
    Round, commit_digest, deploy_batched_oracle, latest_round, opening_tuple, round_from_receipt, sign_commit,
    signed_commit_tuple,
)
from cvm.chain.contracts import register_model
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.protocol import commitment
from cvm.chain.states import Status
from cvm.chain.store import ModelStore

pytestmark = pytest.mark.chain
WINDOW = 200


def batched_env(tmp_path) -> Env:
    """The embedded chain with BatchedOracle, the tiny model registered and three operators staked."""
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(tiny_model()))
    chain = EmbeddedChain(store, backend="reference", num_accounts=10)
    dep = deploy_batched_oracle(chain.w3, chain.keys[0], CONFIG)
    register_model(dep.registry, chain.keys[0], model)
    e = Env(chain, store, model, dep, CONFIG)
    e.stake_all(3)
    return e


@pytest.fixture
def env(tmp_path):
    return batched_env(tmp_path)


class Round_:
    """One request driven through BatchedOracle; keeps the latest round from each receipt."""

    def __init__(self, env: Env, window: int = 0):
        self.env, self.oracle = env, env.oracle
        x = bytes([1, 2, 3, 4])
        self.input = x
        y = env.model.run(env.model.decode_input(x), backend="reference")
        self.output, self.output_hash = env.model.encode_output(y), cvm.output_hash(y)
        call = (self.oracle.functions.requestWithWindow(env.model.hash, x, env.player.address, window) if window
                else self.oracle.functions.request(env.model.hash, x, env.player.address))
        self.receipts = [env.send(env.player, call, value=env.fee)]
        self.round = round_from_receipt(self.oracle, self.receipts[0])
        self.rid = self.round.request_id
        env.chain.mine()  # the request's block is sealed: the draw's seed is known
        self.salts = {op.address: os.urandom(32) for op in env.operators}

    def commitment(self, op, output_hash=None, root=NO_TRACE, output=None) -> bytes:
        return commitment(self.rid, output_hash or self.output_hash, root, self.salts[op.address], op.address,
                          self.output if output is None else output)

    def open_reveals(self):
        """Past the commit deadline: seats are drawn until then, and reveals open after it."""
        deadline = self.round.fields["commitDeadline"]
        if self.env.chain.timestamp() <= deadline:
            self.env.chain.advance_time(deadline + 1 - self.env.chain.timestamp())

    def signed(self, op, output_hash=None, output=None, root=NO_TRACE):
        return sign_commit(op, self.env.w3.eth.chain_id, self.oracle.address, self.rid,
                           self.commitment(op, output_hash, root, output))

    def send(self, account, fn, *args, **kw):
        r = self.env.send(account, fn(self.rid, self.round.call, *args), **kw)
        self.receipts.append(r)
        self.round = round_from_receipt(self.oracle, r)
        return r

    def commit_signed(self, submitter, signed: list):
        return self.send(submitter, self.oracle.functions.commitSigned, [signed_commit_tuple(s) for s in signed])

    def opening(self, op, output_hash=None, root=NO_TRACE):
        return opening_tuple(op.address, output_hash or self.output_hash, root, self.salts[op.address])

    def reveal(self, submitter, openings: list, output=None, **kw):
        self.open_reveals()
        return self.send(submitter, self.oracle.functions.reveal, openings, output or self.output, **kw)


def test_a_round_is_three_transactions(env):
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env)
    assert env.oracle.functions.commitDigest(rnd.rid, rnd.commitment(ops[0])).call() == \
        commit_digest(env.w3.eth.chain_id, env.oracle.address, rnd.rid, rnd.commitment(ops[0]))
    rnd.commit_signed(relay, [rnd.signed(op) for op in ops])
    assert rnd.round.committers == [op.address for op in ops]
    assert all(env.oracle.functions.operators(op.address).call()[3] == CONFIG.slash_amount for op in ops)
    r = rnd.reveal(relay, [rnd.opening(op) for op in ops], gas=env.oracle.functions.revealGas(3).call() + 100_000)

    assert env.oracle.functions.statusOf(rnd.rid).call() == Status.FINALIZED
    assert rnd.round.status == Status.FINALIZED and rnd.round.fields["agreedMask"] == 0b111
    assert env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert latest_round(env.oracle, rnd.rid).call == rnd.round.call
    for op in ops:  # paid, bond released
        assert env.claimable(op.address) > 0
        assert env.oracle.functions.operators(op.address).call()[3] == 0
    callback_pay = CONFIG.operator_gas_price * CONFIG.callback_gas_limit  # refunded to the member that finalised
    share = (env.fee - callback_pay) // 3
    assert env.claimable(relay.address) == callback_pay + env.fee - callback_pay - 2 * share
    gas = [x["gasUsed"] for x in rnd.receipts]
    print(f"BATCHED ROUND GAS (embedded chain, tiny model, k=2 of 3, callback to an account): {sum(gas):,} {gas}")


def test_signatures_are_checked(env):
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env)
    other = Round_(env)
    stranger = Account.create()
    with reverts("NotOperator"):  # a signer without stake
        rnd.commit_signed(relay, [sign_commit(stranger, env.w3.eth.chain_id, env.oracle.address, rnd.rid,
                                              rnd.commitment(ops[0]))])
    forged = dict(rnd.signed(ops[0]), commitment="0x" + os.urandom(32).hex())  # another commitment, same signature
    with reverts("NotOperator"):  # recovers to some other address
        rnd.commit_signed(relay, [forged])
    replayed = other.signed(ops[0])  # signed for another request
    with reverts("NotOperator"):
        rnd.commit_signed(relay, [replayed])
    high_s = dict(rnd.signed(ops[0]))
    high_s["s"] = "0x" + (0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141 - int(high_s["s"], 16)).to_bytes(32, "big").hex()
    high_s["v"] = 55 - high_s["v"]
    with reverts("BadSignature"):  # the signature's other form
        rnd.commit_signed(relay, [high_s])
    with reverts("AlreadyCommitted"):
        rnd.commit_signed(relay, [rnd.signed(ops[0]), rnd.signed(ops[0])])
    rnd.commit_signed(relay, [rnd.signed(ops[0])])
    with reverts("AlreadyCommitted"):  # the same signed commit again
        rnd.commit_signed(relay, [rnd.signed(ops[0])])


def test_a_stale_round_is_refused(env):
    ops = env.operators[:3]
    rnd = Round_(env)
    old = rnd.round
    rnd.commit_signed(ops[0], [rnd.signed(ops[0])])
    with reverts("StaleRound"):
        env.send(ops[1], env.oracle.functions.commit(rnd.rid, old.call, rnd.commitment(ops[1])))
    forged = Round(rnd.rid, {**rnd.round.fields, "fee": 1})
    with reverts("StaleRound"):
        env.send(ops[1], env.oracle.functions.commit(rnd.rid, forged.call, rnd.commitment(ops[1])))


def test_a_member_left_out_commits_and_reveals_alone(env):
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env)
    rnd.commit_signed(relay, [rnd.signed(ops[0]), rnd.signed(ops[1])])  # the aggregator dropped ops[2]
    with reverts("RevealPhaseNotOpen"):  # nobody may open before the commit deadline: seats are drawn until then
        rnd.send(relay, env.oracle.functions.reveal, [rnd.opening(ops[0])], rnd.output)
    rnd.send(ops[2], env.oracle.functions.commit, rnd.commitment(ops[2]))
    rnd.reveal(ops[2], [rnd.opening(ops[2])])  # alone, then the aggregator's batch finalises
    rnd.reveal(relay, [rnd.opening(ops[0])], gas=env.oracle.functions.revealGas(3).call())
    assert rnd.round.status == Status.FINALIZED and rnd.round.fields["agreedMask"] == 0b101
    rnd.reveal(ops[1], [rnd.opening(ops[1])])  # late, agreeing: bond back, no fee
    assert env.oracle.functions.operators(ops[1].address).call()[3] == 0
    assert env.claimable(ops[1].address) == 0


def test_nobody_reveals_anothers_answer(env):
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env)
    # ops[1] commits something it did not compute; once ops[0] opens, it cannot claim that opening
    rnd.commit_signed(relay, [rnd.signed(ops[0]), rnd.signed(ops[1], output_hash=os.urandom(32)), rnd.signed(ops[2])])
    rnd.reveal(ops[0], [rnd.opening(ops[0])])
    copied = opening_tuple(ops[1].address, rnd.output_hash, NO_TRACE, rnd.salts[ops[0].address])
    with reverts("CommitmentMismatch"):
        rnd.reveal(ops[1], [copied])
    with reverts("CommitmentMismatch"):  # its own salt with ops[0]'s answer: it committed to another
        rnd.reveal(ops[1], [rnd.opening(ops[1])])
    with reverts("AlreadyRevealed"):
        rnd.reveal(relay, [rnd.opening(ops[0])])


def test_settle_refunds_and_slashes_the_silent(env):
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env)
    rnd.commit_signed(relay, [rnd.signed(ops[0])])
    with reverts("RevealPhaseNotOver"):
        rnd.send(relay, env.oracle.functions.settle)
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)
    r = rnd.send(relay, env.oracle.functions.settle)
    assert rnd.round.status == Status.EXPIRED and rnd.round.fields["settled"]
    assert env.oracle.functions.refundOf(rnd.rid).call() == env.fee
    assert env.claimable(env.player.address) == env.fee
    slashed = env.oracle.events.Slashed().process_receipt(r, errors=DISCARD)
    assert [e["args"]["operator"] for e in slashed] == [ops[0].address]
    assert env.stake_of(ops[0]) == CONFIG.min_stake - CONFIG.slash_amount
    assert env.oracle.functions.operators(ops[0].address).call()[3] == 0
    with reverts("AlreadySettled"):
        rnd.send(relay, env.oracle.functions.settle)


def test_the_dispute_game_refutes_a_batched_vote(env):
    """ops[0] reveals one trace root, ops[1] another; ops[0] disputes, bisects, and ops[1] stays silent:
    the game's verdict reaches the batched round through resolveDispute (the interface DisputeGame
    calls on any oracle), ops[1] is slashed, half to ops[0], and ops[0]'s vote is final."""
    ops, relay = env.operators[:3], env.operators[0]  # a member aggregates
    rnd = Round_(env, window=WINDOW)
    children = {op.address: (os.urandom(32), os.urandom(32)) for op in ops[:2]}
    roots = {a: Web3.keccak(left + right) for a, (left, right) in children.items()}
    rnd.commit_signed(relay, [rnd.signed(ops[0]) | {}, rnd.signed(ops[1])] and
                      [sign_commit(op, env.w3.eth.chain_id, env.oracle.address, rnd.rid,
                                   rnd.commitment(op, root=roots[op.address])) for op in ops[:2]])
    env.chain.advance_time(CONFIG.commit_window + 1)  # two of three seats: the deadline opens the reveals
    for op in ops[:2]:
        rnd.reveal(op, [rnd.opening(op, root=roots[op.address])])
    claim = {op.address: (rnd.output_hash, Web3.keccak(rnd.output), roots[op.address]) for op in ops[:2]}
    r = rnd.env.send(ops[0], env.oracle.functions.openDispute(rnd.rid, rnd.round.call, ops[1].address,
                                                              claim[ops[0].address], claim[ops[1].address]))
    dispute_id = env.oracle.events.DisputeOpened().process_receipt(r, errors=DISCARD)[0]["args"]["disputeId"]
    assert env.oracle.functions.disputesOf(rnd.rid).call() == [1, 1, CONFIG.slash_amount]
    game = env.w3.eth.contract(address=env.oracle.functions.disputeGame().call(),
                               abi=__import__("cvm.chain.contracts", fromlist=["load_artifact"]).load_artifact("DisputeGame")["abi"])
    env.send(ops[0], game.functions.bisect(dispute_id, *children[ops[0].address]))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    r = env.send(relay, game.functions.timeout(dispute_id))
    slashed = env.oracle.events.Slashed().process_receipt(r, errors=DISCARD)
    assert [e["args"]["operator"] for e in slashed] == [ops[1].address]
    assert env.oracle.functions.disputesOf(rnd.rid).call()[0] == 0
    assert env.claimable(ops[0].address) == CONFIG.slash_amount // 2

    env.chain.advance_time(CONFIG.reveal_window + WINDOW)
    rnd.send(relay, env.oracle.functions.finalize, rnd.output_hash, roots[ops[0].address], rnd.output,
             gas=env.oracle.functions.revealGas(3).call())
    assert rnd.round.status == Status.FINALIZED
    assert rnd.round.result() == Web3.keccak(Web3().codec.encode(
        ["bytes32", "bytes32", "bytes32"], list(claim[ops[0].address])))
    for op in ops[:2]:
        assert env.oracle.functions.operators(op.address).call()[3] == 0  # every bond released
    assert env.stake_of(ops[1]) == CONFIG.min_stake - CONFIG.slash_amount  # slashed once, not again at close
