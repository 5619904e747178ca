"""The attacks of the outside review (issue 17), each failing now: griefing many requests with one
stake, withdrawing before a request is settled, and starving the honest finalising reveal of gas."""

from dataclasses import replace

import pytest
from chainkit import CONFIG, make_env, reverts
from web3.logs import DISCARD

import cvm
from cvm.chain.node import Status

pytestmark = pytest.mark.chain


def test_one_stake_cannot_block_unbounded_requests(env, salts):
    """Each commit locks slashAmount of free stake: a stake of minStake blocks at most
    minStake // slashAmount requests at a time (it used to block any number for one slash)."""
    env.stake_all(1)
    griefer = env.operators[0]
    data, _ = env.sample()
    rids = [env.request(data) for _ in range(3)]
    for rid in rids[:CONFIG.min_stake // CONFIG.slash_amount]:
        env.commit(griefer, rid, b"\x01" * 32, salts[0])
    with reverts("InsufficientFreeStake"):
        env.commit(griefer, rids[2], b"\x01" * 32, salts[0])


def test_no_withdrawal_while_a_bond_is_locked(env, salts):
    """Before: withdrawStake at the smallest delay could run before settle, escaping the slash."""
    env.stake_all(1)
    op = env.operators[0]
    data, _ = env.sample()
    rid = env.request(data)
    env.commit(op, rid, b"\x01" * 32, salts[0])
    env.send(op, env.oracle.functions.requestUnstake())
    env.chain.advance_time(CONFIG.withdrawal_delay + 1)
    with reverts("BondsLocked"):
        env.send(op, env.oracle.functions.withdrawStake())
    env.send(env.player, env.oracle.functions.settle(rid))  # never revealed: slashed
    assert env.stake_of(op) == CONFIG.min_stake - CONFIG.slash_amount
    env.send(op, env.oracle.functions.withdrawStake())


def test_the_reveal_gas_rule_carries_a_worst_case_finalising_reveal(tmp_path, salts):
    """Before: reveals carried callbackGasLimit + 400,000, short of what the finalising one needs with
    a large callback limit and many other reveals before it. Now the node sends revealGas(len): here
    with n = 8, the largest callback limit the constructor takes, 3 distinct wrong reveals and 4
    agreeing ones first (8 seats: the fast path needs a majority, 5)."""
    config = replace(CONFIG, quorum=2, committee_size=8, callback_gas_limit=5_000_000)
    env = make_env(tmp_path, config, num_accounts=12)
    ops = env.chain.keys[1:6] + env.chain.keys[7:10]  # 8 operators (keys[6] is the player)
    for op in ops:
        env.send(op, env.oracle.functions.stake(), value=config.min_stake)
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, 2)  # burns all its gas
    data, y = env.sample()
    out, h = env.model.encode_output(y), cvm.output_hash(y)
    r = env.send(env.player, consumer.functions.request(env.model.hash, data), value=env.fee)  # window 0
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    wrong = [bytes([i + 1]) * len(out) for i in range(3)]
    outputs = wrong + [out] * 5
    for op, o in zip(ops, outputs):
        env.commit(op, rid, cvm.output_hash(env.model.decode_output(o)), salts[0], output=o)
    for op, o in zip(ops[:7], outputs):
        env.reveal(op, rid, cvm.output_hash(env.model.decode_output(o)), salts[0], o)
    gas = env.oracle.functions.revealGas(len(out)).call()
    r = env.reveal(ops[7], rid, h, salts[0], out, gas=gas)
    assert env.request_state(rid)["status"] == Status.FINALIZED
    assert not env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert r["gasUsed"] > config.callback_gas_limit  # the callback really got its limit


