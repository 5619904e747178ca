"""Issue 27's attacks on BatchedOracle (embedded chain), each a test that failed before the change:

1. an outsider submits two honest members' openings with bytes of its choice (the commitment now
   binds keccak256(output), so only the committed bytes open it);
2. attackers whose addresses are drawn for every seat commit first (every drawn operator gets a
   seat, reveals open only after the commit deadline), and an operator with no seat at all
   challenges the forged result within the window (`challenge`) and wins;
3. (relay: tests/chain/test_chain_relay_auth.py);
4. the callback's gas refund goes to an outsider that submits the finalising reveal; a vote a
   dispute refuted reaches the quorum on the fast path; someone claims the honest vote as its own
   and loses its game on purpose to have the honest vote refuted.

The disputes here are won by timeouts (the parties play random trace roots); the games decided by
re-execution are tests/chain/test_chain_batched_dispute.py's."""

from __future__ import annotations

import os

import pytest
import cvm
from chainkit import CONFIG, NO_TRACE, make_env, reverts
from test_chain_batched import WINDOW, Round_, batched_env
from web3 import Web3
from web3.logs import DISCARD

from cvm.chain.batch import sign_commit
from cvm.chain.contracts import contract_at
from cvm.chain.states import Status

pytestmark = pytest.mark.chain


@pytest.fixture
def env(tmp_path):
    return batched_env(tmp_path)


def game_of(env):
    return contract_at(env.w3, "DisputeGame", env.oracle.functions.disputeGame().call())


class Trace_:
    """A made-up trace root with known children: enough to make the first bisection move."""

    def __init__(self):
        self.children = (os.urandom(32), os.urandom(32))
        self.root = Web3.keccak(self.children[0] + self.children[1])


def claim(rnd, root, output=None) -> tuple:
    output = rnd.output if output is None else output
    return (rnd.output_hash, Web3.keccak(output), root)


def dispute_ids(env, receipt) -> list[int]:
    return [e["args"]["disputeId"] for e in env.oracle.events.DisputeOpened().process_receipt(receipt, errors=DISCARD)]


def test_an_outsider_cannot_substitute_the_output(env):
    """The members' openings are public (relay, mempool): an outsider may not submit them at all, and a
    member (a colluder) that submits honest members' openings with other bytes is refused too."""
    ops, outsider = env.operators[:3], env.chain.keys[7]
    rnd = Round_(env)
    rnd.commit_signed(ops[2], [rnd.signed(op) for op in ops])
    forged = bytes(len(rnd.output))
    with reverts("NotSeated"):
        rnd.reveal(outsider, [rnd.opening(op) for op in ops[:2]], output=forged)
    with reverts("CommitmentMismatch"):  # the members' openings with other bytes
        rnd.reveal(ops[2], [rnd.opening(op) for op in ops[:2]], output=forged)
    r = rnd.reveal(ops[2], [rnd.opening(op) for op in ops[:2]], gas=env.oracle.functions.revealGas(3).call())
    assert rnd.round.status == Status.FINALIZED
    assert bytes(env.oracle.events.Finalized().process_receipt(r, errors=DISCARD)[0]["args"]["output"]) == rnd.output


def test_an_outsider_cannot_make_an_aggregated_submission_stale(env):
    """Before, anyone could submit one member's public signed commit or opening just ahead of the
    aggregator's batch, whose round was then stale (StaleRound), for free. Now only members submit:
    the outsider's copy reverts at once, and the aggregator's batch on the round it read lands."""
    ops, outsider = env.operators[:3], env.chain.keys[7]
    rnd = Round_(env)
    before = rnd.round
    with reverts("NotSeated"):
        rnd.commit_signed(outsider, [rnd.signed(ops[1])])
    assert rnd.round.call == before.call
    rnd.commit_signed(ops[0], [rnd.signed(op) for op in ops])
    committed = rnd.round
    with reverts("NotSeated"):
        rnd.reveal(outsider, [rnd.opening(ops[1])])
    assert rnd.round.call == committed.call
    rnd.reveal(ops[0], [rnd.opening(op) for op in ops[:2]], gas=env.oracle.functions.revealGas(3).call())
    assert rnd.round.status == Status.FINALIZED


def test_a_member_that_finalises_is_refunded_the_callback_gas(env):
    ops = env.operators[:3]
    rnd = Round_(env)
    rnd.commit_signed(ops[2], [rnd.signed(op) for op in ops])
    rnd.reveal(ops[2], [rnd.opening(op) for op in ops[:2]], gas=env.oracle.functions.revealGas(3).call())
    # ops[2] revealed nothing yet: no fee share, only the callback's gas at operatorGasPrice
    assert env.claimable(ops[2].address) == CONFIG.operator_gas_price * CONFIG.callback_gas_limit


def drawn_for_all(env, attackers, window: int) -> Round_:
    """A request whose draw seats every attacker (each drawn with probability 3/5 here)."""
    for _ in range(60):
        rnd = Round_(env, window=window)
        if all(env.oracle.functions.isDrawn(rnd.rid, rnd.round.call, a.address).call() for a in attackers):
            return rnd
    raise AssertionError("no request drew every attacker in 60 tries")


def test_drawn_attackers_committing_first_do_not_lock_out_a_drawn_honest_operator(tmp_path):
    """Three attacker addresses (stake 1 each) are drawn for all three expected seats and commit at
    once; the honest operator (stake 2: drawn every time) used to get CommitteeFull. Now it takes a
    fourth seat, nobody reveals before the commit deadline, and with the window its disputes (one per
    attacker, each lost by the attacker's timeout) refute the forged vote: it finalises alone."""
    env = batched_env(tmp_path)  # operators[:3] staked min_stake each
    attackers, honest, relay = env.operators[:3], env.operators[3], env.chain.keys[7]
    env.send(honest, env.oracle.functions.stake(), value=2 * CONFIG.min_stake)
    env.chain.mine()
    rnd = drawn_for_all(env, attackers, WINDOW)
    forged = bytes(len(rnd.output))
    f_root, h = NO_TRACE, Trace_()
    rnd.commit_signed(attackers[0], [rnd.signed(a, output=forged) for a in attackers])
    rnd.send(honest, env.oracle.functions.commit, rnd.commitment(honest, root=h.root))  # was CommitteeFull
    assert rnd.round.committers[-1] == honest.address
    with reverts("RevealPhaseNotOpen"):
        rnd.send(attackers[0], env.oracle.functions.reveal, [rnd.opening(a) for a in attackers], forged)

    rnd.reveal(attackers[0], [rnd.opening(a, root=f_root) for a in attackers], output=forged)
    rnd.reveal(honest, [rnd.opening(honest, root=h.root)])
    assert rnd.round.status == Status.PENDING  # the window: nothing final before it ends
    game, ids = game_of(env), []
    for a in attackers:  # one game per attacker, at once
        r = env.send(honest, env.oracle.functions.openDispute(rnd.rid, rnd.round.call, a.address,
                                                              claim(rnd, h.root), claim(rnd, f_root, forged)))
        ids += dispute_ids(env, r)
    for i in ids:
        env.send(honest, game.functions.bisect(i, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    for i in ids[:2]:
        env.send(relay, game.functions.timeout(i))
    forged_vote = rnd.round.word(0)
    assert not env.oracle.functions.refuted(rnd.rid, forged_vote).call()  # a timeout proves nothing while
    env.send(relay, game.functions.timeout(ids[2]))                       # the vote has an unslashed voter
    assert env.oracle.functions.refuted(rnd.rid, forged_vote).call()
    assert all(env.stake_of(a) == CONFIG.min_stake - CONFIG.slash_amount for a in attackers)

    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + WINDOW)
    rnd.send(relay, env.oracle.functions.finalize, rnd.output_hash, h.root, rnd.output)
    assert rnd.round.status == Status.FINALIZED and rnd.round.result() == rnd.round.word(3)


def test_an_operator_without_a_seat_challenges_and_wins(env):
    """Two attackers hold every seat of a request with a window and reveal a forged output. An
    operator that staked after the request (so not drawn) challenges each of them with its own
    claim and bond; both lose their games; after the window the outsider's output finalises and it
    earns the fee and half of each slashed bond."""
    attackers, outsider, relay = env.operators[:2], env.operators[3], env.chain.keys[7]
    rnd = Round_(env, window=WINDOW)
    env.send(outsider, env.oracle.functions.stake(), value=CONFIG.min_stake)  # after the request: no seat
    assert not env.oracle.functions.isDrawn(rnd.rid, rnd.round.call, outsider.address).call()
    forged, h = bytes(len(rnd.output)), Trace_()
    rnd.commit_signed(attackers[0], [rnd.signed(a, output=forged) for a in attackers])
    rnd.reveal(attackers[0], [rnd.opening(a) for a in attackers], output=forged)
    with reverts("SeatedOperator"):
        env.send(attackers[0], env.oracle.functions.challenge(rnd.rid, rnd.round.call, attackers[1].address,
                                                              claim(rnd, h.root), claim(rnd, NO_TRACE, forged)))
    game, ids = game_of(env), []
    for a in attackers:
        r = env.send(outsider, env.oracle.functions.challenge(rnd.rid, rnd.round.call, a.address,
                                                              claim(rnd, h.root), claim(rnd, NO_TRACE, forged)))
        ids += dispute_ids(env, r)
    assert env.oracle.functions.operators(outsider.address).call()[3] == 2 * CONFIG.slash_amount  # a bond a game
    for i in ids:
        env.send(outsider, game.functions.bisect(i, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    for i in ids:
        env.send(relay, game.functions.timeout(i))
    assert env.oracle.functions.operators(outsider.address).call()[3] == 0  # bonds back
    assert env.oracle.functions.refuted(rnd.rid, rnd.round.word(0)).call()

    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + WINDOW)
    with reverts("NoUniqueResult"):  # the forged output does not finalise
        rnd.send(relay, env.oracle.functions.finalize, rnd.output_hash, NO_TRACE, forged)
    r = rnd.send(relay, env.oracle.functions.finalize, rnd.output_hash, h.root, rnd.output)
    assert bytes(env.oracle.events.Finalized().process_receipt(r, errors=DISCARD)[0]["args"]["output"]) == rnd.output
    assert env.claimable(outsider.address) == env.fee + 2 * (CONFIG.slash_amount // 2)
    assert env.claimable(relay.address) == 0


def test_a_refuted_vote_never_finalises_on_the_fast_path(env):
    """Window 0: ops[0] reveals H, ops[1] reveals F; ops[0] disputes and ops[1] times out, F refuted
    (its only voter slashed). ops[2] then reveals F as well: two equal reveals, but F never finalises."""
    ops, relay = env.operators[:3], env.chain.keys[7]
    rnd = Round_(env)
    forged, h = bytes(len(rnd.output)), Trace_()
    rnd.commit_signed(ops[0], [sign_commit(ops[0], env.w3.eth.chain_id, env.oracle.address, rnd.rid,
                                          rnd.commitment(ops[0], root=h.root)),
                              rnd.signed(ops[1], output=forged), rnd.signed(ops[2], output=forged)])
    rnd.reveal(ops[0], [rnd.opening(ops[0], root=h.root)])
    rnd.reveal(ops[1], [rnd.opening(ops[1])], output=forged)
    r = env.send(ops[0], env.oracle.functions.openDispute(rnd.rid, rnd.round.call, ops[1].address,
                                                          claim(rnd, h.root), claim(rnd, NO_TRACE, forged)))
    (i,) = dispute_ids(env, r)
    game = game_of(env)
    env.send(ops[0], game.functions.bisect(i, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    env.send(relay, game.functions.timeout(i))  # ops[1] missed its move: slashed, and F had no other voter
    assert env.oracle.functions.refuted(rnd.rid, rnd.round.word(1)).call()
    rnd.reveal(ops[2], [rnd.opening(ops[2])], output=forged, gas=env.oracle.functions.revealGas(3).call())
    assert rnd.round.votes(rnd.round.word(1)) == 2 and rnd.round.status == Status.PENDING


def test_claiming_the_honest_vote_and_losing_on_purpose_refutes_nothing(env):
    """An attacker without a seat challenges the colluders' forged vote claiming the honest vote H as
    its own, then misses its move: it used to refute H (and slash H's honest voters). Now only the
    attacker is slashed, H stands, and the honest member still wins its own game."""
    honest, colluder, attacker, relay = env.operators[0], env.operators[1], env.operators[3], env.chain.keys[7]
    rnd = Round_(env, window=WINDOW)
    env.send(attacker, env.oracle.functions.stake(), value=CONFIG.min_stake)
    forged, h, f = bytes(len(rnd.output)), Trace_(), Trace_()
    sign = lambda op, root, out=None: sign_commit(op, env.w3.eth.chain_id, env.oracle.address, rnd.rid,  # noqa: E731
                                                  rnd.commitment(op, root=root, output=out))
    rnd.commit_signed(honest, [sign(honest, h.root), sign(colluder, f.root, forged)])
    rnd.reveal(honest, [rnd.opening(honest, root=h.root)])
    rnd.reveal(colluder, [rnd.opening(colluder, root=f.root)], output=forged)
    game = game_of(env)
    r = env.send(attacker, env.oracle.functions.challenge(rnd.rid, rnd.round.call, colluder.address,
                                                          claim(rnd, h.root), claim(rnd, f.root, forged)))
    (bad,) = dispute_ids(env, r)
    env.send(colluder, game.functions.bisect(bad, *f.children))  # the colluder moves, the attacker does not
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    env.send(relay, game.functions.timeout(bad))
    assert not env.oracle.functions.refuted(rnd.rid, rnd.round.word(0)).call()  # H stands
    assert env.stake_of(attacker) == CONFIG.min_stake - CONFIG.slash_amount and env.stake_of(honest) == CONFIG.min_stake
    r = env.send(honest, env.oracle.functions.openDispute(rnd.rid, rnd.round.call, colluder.address,
                                                          claim(rnd, h.root), claim(rnd, f.root, forged)))
    (good,) = dispute_ids(env, r)
    env.send(honest, game.functions.bisect(good, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    env.send(relay, game.functions.timeout(good))
    assert env.oracle.functions.refuted(rnd.rid, rnd.round.word(1)).call()
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + WINDOW)
    rnd.send(relay, env.oracle.functions.finalize, rnd.output_hash, h.root, rnd.output)
    assert rnd.round.status == Status.FINALIZED and rnd.round.result() == rnd.round.word(0)


def test_inference_oracle_takes_an_outside_challenge_too(tmp_path, salts):
    """The per-transaction InferenceOracle has the same optimistic path: two colluders hold the only
    seats and reveal a forged output; an operator that staked after the request challenges both,
    both miss their moves, and its output finalises after the window."""
    env = make_env(tmp_path)
    env.stake_all(2)
    colluders, outsider, relay = env.operators[:2], env.operators[3], env.chain.keys[7]
    data, y = env.sample()
    rid = env.request(data, window=WINDOW)
    env.send(outsider, env.oracle.functions.stake(), value=CONFIG.min_stake)
    out, forged, h = env.output_of(rid), bytes(len(env.output_of(rid))), Trace_()
    out_hash = cvm.output_hash(y)
    for op, salt in zip(colluders, salts):
        env.commit(op, rid, out_hash, salt, output=forged)
    for op, salt in zip(colluders, salts):
        env.reveal(op, rid, out_hash, salt, forged)
    game, ids = game_of(env), []
    mine, theirs = (out_hash, Web3.keccak(out), h.root), (out_hash, Web3.keccak(forged), NO_TRACE)
    with reverts("SeatedOperator"):
        env.send(colluders[0], env.oracle.functions.challenge(rid, colluders[1].address, mine, theirs))
    for a in colluders:
        ids += dispute_ids(env, env.send(outsider, env.oracle.functions.challenge(rid, a.address, mine, theirs)))
    for i in ids:
        env.send(outsider, game.functions.bisect(i, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    for i in ids:
        env.send(relay, game.functions.timeout(i))
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + WINDOW)
    env.send(relay, env.oracle.functions.finalize(rid, out_hash, h.root, out))
    state = env.request_state(rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == out_hash
    assert env.claimable(outsider.address) == env.fee + 2 * (CONFIG.slash_amount // 2)
    assert env.oracle.functions.operators(outsider.address).call()[3] == 0


def test_an_outside_claim_that_loses_by_timeout_neither_refutes_nor_blocks(env):
    """Two griefs with one bond each. (a) Before any member reveals the honest vote H, an attacker
    without a seat challenges the colluder's F claiming H and stops: H must not fall with it (its
    honest revealers come later). (b) Another claims some F' against the honest vote and stops: F'
    never stands beside the committee's votes (only a claim that won a game does), so the request
    is not left without a unique result."""
    honest, colluder, attacker, griefer = env.operators[0], env.operators[1], env.operators[3], env.chain.keys[8]
    rnd = Round_(env, window=WINDOW)
    for who in (attacker, griefer):
        env.send(who, env.oracle.functions.stake(), value=CONFIG.min_stake)
    forged, h, f = bytes(len(rnd.output)), Trace_(), Trace_()
    sign = lambda op, root, out=None: sign_commit(op, env.w3.eth.chain_id, env.oracle.address, rnd.rid,  # noqa: E731
                                                  rnd.commitment(op, root=root, output=out))
    rnd.commit_signed(honest, [sign(honest, h.root), sign(colluder, f.root, forged)])
    rnd.reveal(colluder, [rnd.opening(colluder, root=f.root)], output=forged)
    game = game_of(env)
    (a,) = dispute_ids(env, env.send(attacker, env.oracle.functions.challenge(
        rnd.rid, rnd.round.call, colluder.address, claim(rnd, h.root), claim(rnd, f.root, forged))))
    env.send(colluder, game.functions.bisect(a, *f.children))
    rnd.reveal(honest, [rnd.opening(honest, root=h.root)])
    (g,) = dispute_ids(env, env.send(griefer, env.oracle.functions.challenge(
        rnd.rid, rnd.round.call, honest.address, claim(rnd, Trace_().root, forged), claim(rnd, h.root))))
    env.send(honest, game.functions.bisect(g, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    env.send(honest, game.functions.timeout(a))
    env.send(honest, game.functions.timeout(g))
    assert not env.oracle.functions.refuted(rnd.rid, rnd.round.word(0)).call()  # (a): H stands
    assert env.stake_of(attacker) == env.stake_of(griefer) == CONFIG.min_stake - CONFIG.slash_amount
    (d,) = dispute_ids(env, env.send(honest, env.oracle.functions.openDispute(
        rnd.rid, rnd.round.call, colluder.address, claim(rnd, h.root), claim(rnd, f.root, forged))))
    env.send(honest, game.functions.bisect(d, *h.children))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    env.send(honest, game.functions.timeout(d))
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + WINDOW)
    rnd.send(honest, env.oracle.functions.finalize, rnd.output_hash, h.root, rnd.output)  # (b): H is the one
    assert rnd.round.status == Status.FINALIZED and rnd.round.result() == rnd.round.word(0)
