"""InferenceOracle on the embedded chain: staking, requests, commit-reveal, quorum, slashing,
expiry and refund, callbacks (reverting, gas-burning, re-entering), operator-only guards."""

import pytest
from chainkit import CONFIG, reverts
from web3.logs import DISCARD

import cvm
from dataclasses import replace

from cvm.chain.contracts import OracleConfig, deploy
from cvm.chain.node import Status, commitment
from cvm.chain.protocol import is_drawn

pytestmark = pytest.mark.chain

WRONG_RESULT, MISSED_REVEAL = 0, 1
RECORD, REVERT, BURN, REENTER = range(4)


def agreed(env, seed=0):
    data, y = env.sample(seed)
    return data, env.model.encode_output(y), cvm.output_hash(y)


# ---------------------------------------------------------------- config and staking


def test_constructor_rejects_bad_config(env):
    longest = (CONFIG.commit_window + CONFIG.reveal_window + CONFIG.max_challenge_window
               + 17 * CONFIG.dispute_move_time)  # + DisputeGame.maxDuration
    referee, _ = deploy(env.w3, env.deployer, "Referee")
    for bad in (OracleConfig(quorum=4, committee_size=3), OracleConfig(quorum=0),
                OracleConfig(slash_amount=2 * 10**18), OracleConfig(slash_amount=0),
                OracleConfig(withdrawal_delay=600),  # shorter than a request's life and its disputes
                replace(CONFIG, withdrawal_delay=longest),
                OracleConfig(callback_gas_limit=5_000_001)):  # no reveal could carry the callback
        with reverts("InvalidConfig"):
            deploy(env.w3, env.deployer, "InferenceOracle", env.registry.address, referee.address,
                   bad.as_tuple(env.deployer.address))
    with reverts("InvalidConfig"):  # the referee must be a contract (deployed once, on its own)
        deploy(env.w3, env.deployer, "InferenceOracle", env.registry.address, env.deployer.address,
               CONFIG.as_tuple(env.deployer.address))


def test_stake_unstake_withdraw_after_delay(env):
    op = env.operators[0]
    env.send(op, env.oracle.functions.stake(), value=CONFIG.min_stake // 2)
    assert not env.oracle.functions.isOperator(op.address).call()  # below the minimum
    env.send(op, env.oracle.functions.stake(), value=CONFIG.min_stake // 2)
    assert env.oracle.functions.isOperator(op.address).call()

    with reverts("UnstakeNotRequested"):
        env.send(op, env.oracle.functions.withdrawStake())
    env.send(op, env.oracle.functions.requestUnstake())
    assert not env.oracle.functions.isOperator(op.address).call()
    with reverts("OperatorLeaving"):
        env.send(op, env.oracle.functions.stake(), value=1)
    with reverts("StakeLocked"):
        env.send(op, env.oracle.functions.withdrawStake())

    env.chain.advance_time(CONFIG.withdrawal_delay + 1)
    before = env.w3.eth.get_balance(op.address)
    r = env.send(op, env.oracle.functions.withdrawStake())
    fee = r["gasUsed"] * r["effectiveGasPrice"]
    assert env.w3.eth.get_balance(op.address) == before + CONFIG.min_stake - fee
    assert env.stake_of(op) == 0


def test_fee_grows_with_the_models_gas(env):
    assert env.model.gas > 0 and CONFIG.fee_per_gas > 0
    out_bytes = 3 * env.model.outputs[0].dtype.itemsize
    chain_gas = CONFIG.committee_size * (200_000 + 16 * out_bytes) + CONFIG.callback_gas_limit
    assert env.fee == CONFIG.min_fee + CONFIG.fee_per_gas * env.model.gas + CONFIG.operator_gas_price * chain_gas
    data, _ = env.sample()
    with reverts("FeeTooLow"):  # the flat minimum alone no longer pays for a model
        env.request(data, value=CONFIG.min_fee)
    rid = env.request(data, value=env.fee + 7)  # more is accepted and kept as the fee
    assert env.request_state(rid)["fee"] == env.fee + 7


def test_request_checks_fee_model_and_input_length(env):
    data, _ = env.sample()
    with reverts("FeeTooLow") as e:
        env.request(data, value=env.fee - 1)
    assert e.value.error_args == (env.fee - 1, env.fee)
    with reverts("InputLengthMismatch") as e:
        env.request(data + b"\x00")
    assert e.value.error_args == (5, 4)
    call = env.oracle.functions.request(b"\x01" * 32, data, env.player.address)
    with reverts("ModelNotAvailable"):
        env.send(env.player, call, value=env.fee)
    env.send(env.deployer, env.registry.functions.deprecate(env.model.hash))
    with reverts("ModelNotAvailable"):
        env.request(data)


# ---------------------------------------------------------------- commit-reveal and quorum


def test_quorum_finalises_pays_and_calls_back(env, salts):
    env.stake_all()
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, RECORD)
    data, out, h = agreed(env)
    r = env.send(env.player, consumer.functions.request(env.model.hash, data), value=env.fee)
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]

    ops = env.operators[:3]
    for op, salt in zip(ops, salts):
        env.commit(op, rid, h, salt)
    assert not env.oracle.functions.revealOpen(rid).call()  # n commits: seats are drawn until the deadline
    env.reveal(ops[0], rid, h, salts[0], out)
    assert env.request_state(rid)["status"] == Status.PENDING
    r = env.reveal(ops[1], rid, h, salts[1], out)

    state = env.request_state(rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == h
    final = env.oracle.events.Finalized().process_receipt(r, errors=DISCARD)[0]["args"]
    assert final["output"] == out
    assert env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert consumer.functions.lastOutput().call() == out and consumer.functions.calls().call() == 1
    assert env.claimable(ops[0].address) + env.claimable(ops[1].address) == env.fee
    callback_pay = CONFIG.operator_gas_price * CONFIG.callback_gas_limit  # to the finaliser, who paid it
    share = (env.fee - callback_pay) // 2
    assert env.claimable(ops[1].address) == callback_pay + share
    # the third reveals late and agrees: not paid, not slashed, its bond released
    env.reveal(ops[2], rid, h, salts[2], out)
    assert env.claimable(ops[2].address) == 0 and env.stake_of(ops[2]) == CONFIG.min_stake
    assert all(env.oracle.functions.operators(op.address).call()[3] == 0 for op in ops)  # no bond locked

    before = env.w3.eth.get_balance(ops[0].address)
    r = env.send(ops[0], env.oracle.functions.claim())
    paid = env.fee - callback_pay - share
    assert env.w3.eth.get_balance(ops[0].address) == before + paid - r["gasUsed"] * r["effectiveGasPrice"]
    with reverts("NothingToClaim"):
        env.send(ops[0], env.oracle.functions.claim())


def test_reveal_waits_for_commit_phase(env, salts):
    env.stake_all()
    data, out, h = agreed(env)
    rid = env.request(data)
    env.commit(env.operators[0], rid, h, salts[0])
    with reverts("RevealPhaseNotOpen"):
        env.reveal(env.operators[0], rid, h, salts[0], out, open_phase=False)
    env.chain.advance_time(CONFIG.commit_window + 1)
    with reverts("CommitPhaseOver"):
        env.commit(env.operators[1], rid, h, salts[1])
    env.reveal(env.operators[0], rid, h, salts[0], out)  # the deadline opened the reveal phase


def test_reveal_must_match_commitment(env, salts):
    env.stake_all()
    data, out, h = agreed(env)
    rid = env.request(data)
    a, b, c = env.operators[:3]
    env.commit(a, rid, h, salts[0])
    # b copies a's commitment: the operator is inside the hash, so b cannot reveal it
    env.send(b, env.oracle.functions.commit(rid, commitment(rid, h, bytes(32), salts[0], a.address, out)))
    env.commit(c, rid, h, salts[2])
    with reverts("CommitmentMismatch"):
        env.reveal(b, rid, h, salts[0], out)
    with reverts("CommitmentMismatch"):
        env.reveal(a, rid, h, salts[1], out)  # wrong salt
    with reverts("CommitmentMismatch"):
        env.reveal(a, rid, bytes(32), salts[0], out)  # wrong output hash
    env.reveal(a, rid, h, salts[0], out)
    with reverts("AlreadyRevealed"):
        env.reveal(a, rid, h, salts[0], out)


def test_operator_only_guards(env, salts):
    env.stake_all(2)
    data, out, h = agreed(env)
    rid = env.request(data)
    stranger, leaving = env.operators[3], env.operators[1]
    with reverts("NotOperator"):
        env.commit(stranger, rid, h, salts[0])
    env.send(leaving, env.oracle.functions.requestUnstake())
    with reverts("NotOperator"):
        env.commit(leaving, rid, h, salts[0])
    with reverts("NotCommitted"):
        env.reveal(stranger, rid, h, salts[0], out, open_phase=False)
    with reverts("NotOperator"):
        env.send(stranger, env.oracle.functions.requestUnstake())
    env.commit(env.operators[0], rid, h, salts[0])
    with reverts("AlreadyCommitted"):
        env.commit(env.operators[0], rid, h, salts[1])
    with reverts("EmptyCommitment"):
        env.send(env.operators[0], env.oracle.functions.commit(rid, bytes(32)))
    with reverts("UnknownRequest"):
        env.commit(env.operators[0], 99, h, salts[0])


def test_every_drawn_operator_gets_a_seat(env, salts):
    env.stake_all(4)
    data, _, h = agreed(env)
    for _ in range(40):  # each of 4 equal stakes is drawn with probability 3/4: find a request drawing all
        rid = env.request(data)
        env.chain.mine()  # a call runs in the latest block: the request's block hash must be known
        state = env.request_state(rid)
        block_hash = bytes(env.w3.eth.get_block(state["requestBlock"])["hash"])
        for op in env.operators[:4]:  # the node's own copy of the rule agrees with the contract
            stake, unlock, staked_at, _ = env.oracle.functions.operators(op.address).call()
            assert is_drawn(block_hash, rid, op.address, stake, staked_at, state["requestBlock"], state["totalStake"],
                            CONFIG.committee_size) == env.oracle.functions.isDrawn(rid, op.address).call()
        if all(env.oracle.functions.isDrawn(rid, op.address).call() for op in env.operators[:4]):
            break
    else:
        pytest.fail("no request drew all four operators")
    for op, salt in zip(env.operators[:4], salts):  # issue 27: seats are not first come, first served
        env.commit(op, rid, h, salt)
    assert env.request_state(rid)["commits"] == 4  # every drawn operator has a seat (at most MAX_COMMITTEE)


# ---------------------------------------------------------------- slashing


def test_disagreeing_operator_is_not_slashed_but_can_be_disputed(env, salts):
    """Disagreement is no offence by itself (the minority may be the honest one): a dispute decides."""
    env.stake_all()
    data, out, h = agreed(env)
    bad_out = bytes(len(out))
    bad_h = cvm.output_hash(env.model.decode_output(bad_out))
    a, b, c = env.operators[:3]
    rid = env.request(data)
    env.commit(a, rid, bad_h, salts[0], output=bad_out)
    env.commit(b, rid, h, salts[1])
    env.commit(c, rid, h, salts[2])
    env.reveal(a, rid, bad_h, salts[0], bad_out)
    env.reveal(b, rid, h, salts[1], out)
    assert env.request_state(rid)["status"] == Status.PENDING  # 1 vote each so far
    r = env.reveal(c, rid, h, salts[2], out)
    assert env.request_state(rid)["status"] == Status.FINALIZED
    assert not env.oracle.events.Slashed().process_receipt(r, errors=DISCARD)
    assert env.stake_of(a) == CONFIG.min_stake
    assert env.claimable(b.address) + env.claimable(c.address) == env.fee
    assert env.oracle.functions.operators(a.address).call()[3] == CONFIG.slash_amount  # a's bond stays locked
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)
    env.send(env.player, env.oracle.functions.settle(rid))
    assert env.oracle.functions.operators(a.address).call()[3] == 0 and env.stake_of(a) == CONFIG.min_stake


def test_wrong_bytes_with_the_right_hash_do_not_count(env, salts):
    """A reveal votes for (outputHash, keccak(output), traceRoot): the consumer gets the agreed bytes."""
    env.stake_all()
    data, out, h = agreed(env)
    a, b, c = env.operators[:3]
    rid = env.request(data)
    for op, salt, o in zip((a, b, c), salts, (bytes(len(out)), out, out)):
        env.commit(op, rid, h, salt, output=o)
    env.reveal(a, rid, h, salts[0], bytes(len(out)))
    env.reveal(b, rid, h, salts[1], out)
    assert env.request_state(rid)["status"] == Status.PENDING
    env.reveal(c, rid, h, salts[2], out)
    assert env.request_state(rid)["status"] == Status.FINALIZED
    assert bytes(env.request_state(rid)["result"]) != env.oracle.functions.getSubmission(rid, a.address).call()[1]


def test_output_of_another_length_than_registered_is_refused(env, salts):
    env.stake_all()
    data, out, h = agreed(env)
    a, b, c = env.operators[:3]
    rid = env.request(data)
    for op, salt in zip((a, b, c), salts):
        env.commit(op, rid, h, salt)
    for bad in (b"", out + b"\x00", out[:-1]):
        with reverts("WrongOutputLength") as e:
            env.reveal(a, rid, h, salts[0], bad)
        assert e.value.error_args == (len(bad), len(out))
    env.reveal(a, rid, h, salts[0], out)


def test_missed_reveal_is_slashed_at_settle(env, salts):
    env.stake_all()
    data, out, h = agreed(env)
    a, b, c = env.operators[:3]
    rid = env.request(data)
    for op, salt in zip((a, b, c), salts):
        env.commit(op, rid, h, salt)
    env.reveal(a, rid, h, salts[0], out)
    env.reveal(b, rid, h, salts[1], out)  # finalised; c never reveals
    with reverts("RevealPhaseNotOver"):
        env.send(env.player, env.oracle.functions.settle(rid))
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)
    with reverts("RevealPhaseOver"):
        env.reveal(c, rid, h, salts[2], out)
    r = env.send(env.player, env.oracle.functions.settle(rid))
    slashed = env.oracle.events.Slashed().process_receipt(r, errors=DISCARD)
    assert [(s["args"]["operator"], s["args"]["reason"]) for s in slashed] == [(c.address, MISSED_REVEAL)]
    assert env.request_state(rid)["status"] == Status.FINALIZED  # settling a finalised request keeps it
    with reverts("AlreadySettled"):
        env.send(env.player, env.oracle.functions.settle(rid))


# ---------------------------------------------------------------- expiry


def test_unfinalised_request_expires_and_refunds(env, salts):
    env.stake_all()
    data, out, h = agreed(env)
    a, b = env.operators[:2]
    rid = env.request(data)
    env.commit(a, rid, h, salts[0])
    env.commit(b, rid, cvm.output_hash(env.model.decode_output(bytes(len(out)))), salts[1])
    env.chain.advance_time(CONFIG.commit_window + 1)
    env.reveal(a, rid, h, salts[0], out)  # one vote: no quorum
    env.chain.advance_time(CONFIG.reveal_window + 1)
    r = env.send(env.operators[3], env.oracle.functions.settle(rid))
    assert env.oracle.events.Expired().process_receipt(r, errors=DISCARD)
    assert env.request_state(rid)["status"] == Status.EXPIRED
    assert env.claimable(env.player.address) == env.fee
    assert env.stake_of(b) == CONFIG.min_stake - CONFIG.slash_amount  # committed, never revealed
    assert env.stake_of(a) == CONFIG.min_stake  # no agreed result: a revealed, no offence
    with reverts("RequestNotPending"):
        env.commit(env.operators[2], rid, h, salts[2])
    before = env.w3.eth.get_balance(env.player.address)
    r = env.send(env.player, env.oracle.functions.claim())
    assert env.w3.eth.get_balance(env.player.address) == before + env.fee - r["gasUsed"] * r["effectiveGasPrice"]


# ---------------------------------------------------------------- callbacks


def _finalise_for(env, consumer, salts, **reveal_kw):
    data, out, h = agreed(env)
    r = env.send(env.player, consumer.functions.request(env.model.hash, data), value=env.fee)
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    ops = env.operators[:3]
    for op, salt in zip(ops, salts):
        env.commit(op, rid, h, salt)
    env.reveal(ops[0], rid, h, salts[0], out)
    r = env.reveal(ops[1], rid, h, salts[1], out, **reveal_kw)
    assert env.request_state(rid)["status"] == Status.FINALIZED
    return rid, r


@pytest.mark.parametrize("mode", [REVERT, BURN])
def test_failing_callback_does_not_block_finalisation(env, salts, mode):
    env.stake_all()
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, mode)
    _, r = _finalise_for(env, consumer, salts, gas=2_000_000)
    assert not env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert env.claimable(env.operators[0].address) > 0
    if mode == BURN:  # the consumer got callbackGasLimit, not the whole transaction
        assert r["gasUsed"] < CONFIG.callback_gas_limit + 250_000


def test_reentrant_callback_is_refused(env, salts):
    env.stake_all()
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, REENTER)
    rid, r = _finalise_for(env, consumer, salts)
    assert env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    selector = env.w3.keccak(text="Reentrancy()")[:4]
    errors = [consumer.functions.reentryErrors(i).call() for i in range(consumer.functions.reentryErrorCount().call())]
    assert errors == [selector] * 3  # claim, settle and reveal were all refused inside the callback
    assert env.claimable(env.operators[0].address) + env.claimable(env.operators[1].address) == env.fee
    assert env.request_state(rid)["reveals"] == 2


def test_reveal_with_too_little_gas_for_the_callback_reverts(env, salts):
    env.stake_all()
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, RECORD)
    data, out, h = agreed(env)
    r = env.send(env.player, consumer.functions.request(env.model.hash, data), value=env.fee)
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    ops = env.operators[:3]
    for op, salt in zip(ops, salts):
        env.commit(op, rid, h, salt)
    env.reveal(ops[0], rid, h, salts[0], out)
    with reverts("InsufficientGasForCallback"):  # mined: enough gas for the reveal, not the callback
        env.reveal(ops[1], rid, h, salts[1], out, gas=CONFIG.callback_gas_limit + 60_000)
    assert env.request_state(rid)["status"] == Status.PENDING
    env.reveal(ops[1], rid, h, salts[1], out)
    assert consumer.functions.calls().call() == 1
