"""DigitGame, the example consumer: oracle play with a callback, prizes, refunds of expired
requests, the oracle-only callback, and the integer decoding its argmax relies on."""

import numpy as np
import pytest
from chainkit import CONFIG, reverts
from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import decode_revert, deploy, revert_data

pytestmark = pytest.mark.chain
PRIZE = 10**15


@pytest.fixture
def game(env):
    contract, _ = deploy(env.w3, env.deployer, "DigitGame", env.oracle.address, env.model.hash, PRIZE, 0,
                         value=PRIZE)
    return contract


def play(env, game, data, guess):
    r = env.send(env.player, game.functions.play(data, guess), value=env.fee)
    return game.events.GameStarted().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]


def finalise(env, rid, y, salts):
    out, h = env.model.encode_output(y), cvm.output_hash(y)
    for op, salt in zip(env.operators[:3], salts):
        env.commit(op, rid, h, salt, output=out)
    env.reveal(env.operators[0], rid, h, salts[0], out)
    return env.reveal(env.operators[1], rid, h, salts[1], out)


def test_a_win_through_the_oracle_pays_a_prize(env, game, salts):
    env.stake_all()
    assert game.functions.numClasses().call() == 3
    data, y = env.sample(7)
    best = int(np.argmax(y[0]))
    rid = play(env, game, data, best)
    r = finalise(env, rid, y, salts)
    played = game.events.GamePlayed().process_receipt(r, errors=DISCARD)[0]["args"]
    assert (played["requestId"], played["predicted"], played["won"]) == (rid, best, True)
    assert game.functions.wins(env.player.address).call() == 1
    assert game.functions.prizes(env.player.address).call() == PRIZE

    rid2 = play(env, game, data, best)  # the pool is empty now: a win is recorded, not paid
    finalise(env, rid2, y, salts)
    assert game.functions.wins(env.player.address).call() == 2
    assert game.functions.prizes(env.player.address).call() == PRIZE

    before = env.w3.eth.get_balance(env.player.address)
    r = env.send(env.player, game.functions.claimPrize())
    assert env.w3.eth.get_balance(env.player.address) == before + PRIZE - r["gasUsed"] * r["effectiveGasPrice"]
    with reverts("NothingToClaim"):
        env.send(env.player, game.functions.claimPrize())


def test_expired_request_refunds_the_player(env, game):
    data, _ = env.sample(8)
    rid = play(env, game, data, 0)
    with reverts("NotExpired"):
        env.send(env.player, game.functions.refund(rid))
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)
    # the consumer base settles the due request itself, pulls the refund and pays the player
    before = env.w3.eth.get_balance(env.player.address)
    r = env.send(env.deployer, game.functions.reclaimExpired(rid))
    assert env.w3.eth.get_balance(env.player.address) == before + env.fee
    assert game.events.GameRefunded().process_receipt(r, errors=DISCARD)[0]["args"]["fee"] == env.fee
    assert game.functions.refundPool().call() == 0 and env.oracle.functions.statusOf(rid).call() == 3
    with reverts("UnknownRequest"):
        env.send(env.player, game.functions.refund(rid))


def test_only_the_oracle_calls_back(env, game):
    data, y = env.sample(9)
    rid = play(env, game, data, 0)
    with reverts("NotOracle"):
        env.send(env.player, game.functions.onInferenceResult(rid, env.model.hash, env.model.encode_output(y)))


def test_a_result_the_game_did_not_ask_for_is_refused(env, game, salts):
    """Attack: anyone names DigitGame as the callback of its own request, to score a forged game.
    The consumer base accepts results only for its own pending requests: the callback fails."""
    env.stake_all()
    data, y = env.sample(10)
    rid = env.request(data, callback=game.address, window=0)  # the attacker's request, not the game's
    r = finalise(env, rid, y, salts)
    assert env.request_state(rid)["status"] == 2  # finalised
    assert not env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert not game.events.GamePlayed().process_receipt(r, errors=DISCARD)
    assert game.functions.wins(env.player.address).call() == 0


def test_decoding_and_argmax(env, game):
    assert game.functions.decodeInt(bytes.fromhex("ffffffff"), 0, 4).call() == -1
    assert game.functions.decodeInt(bytes.fromhex("00000080"), 0, 4).call() == -(2**31)
    assert game.functions.decodeInt(bytes.fromhex("0180"), 0, 2).call() == -32767
    assert game.functions.decodeInt(bytes.fromhex("7f"), 0, 1).call() == 127
    logits = np.array([[-5, 9, 9]])  # a tie: the first maximum, as numpy
    assert game.functions.argmax(env.model.encode_output(logits)).call() == int(np.argmax(logits))
    assert game.functions.argmax(env.model.encode_output([[-300, -7, -8]])).call() == 1
    with pytest.raises(Exception) as e:  # 5 bytes are not 3 logits
        game.functions.argmax(b"\x00" * 5).call()
    assert decode_revert(env.w3, game.abi, revert_data(e.value)) == ("WrongOutputLength", (5, 3 * env.model.outputs[0].dtype.itemsize))
