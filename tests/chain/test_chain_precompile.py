"""The CVM precompile on the embedded chain: a successful call and its exact gas, and the clean
failures (unknown model, wrong input length, too little gas, a short call)."""

import numpy as np
import pytest
from chainkit import BACKEND, ROOT, TEST_ARTIFACTS, reverts
from web3 import Web3

from cvm.chain.contracts import REVERT_ERRORS, deploy, register_model
from cvm.gas import CALL_BASE_GAS
from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS, GAS_PER_BYTE, precompile_gas

pytestmark = pytest.mark.chain

TX_GAS, ZERO_BYTE_GAS, NONZERO_BYTE_GAS = 21_000, 4, 16
PRECOMPILE = Web3.to_checksum_address(CVM_PRECOMPILE_ADDRESS)


def intrinsic_gas(data: bytes) -> int:
    zeros = data.count(0)
    return TX_GAS + ZERO_BYTE_GAS * zeros + NONZERO_BYTE_GAS * (len(data) - zeros)


def send_to_precompile(env, data: bytes, gas: int) -> dict:
    """A plain transaction to the precompile; returns the receipt whatever its status."""
    sender = env.player
    tx = {"to": PRECOMPILE, "data": data, "gas": gas, "value": 0, "chainId": env.w3.eth.chain_id,
          "nonce": env.w3.eth.get_transaction_count(sender.address), "maxFeePerGas": 10**10,
          "maxPriorityFeePerGas": 1}
    tx_hash = env.w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction)
    return env.w3.eth.wait_for_transaction_receipt(tx_hash)


@pytest.fixture
def tiny_cnn(env):
    """The committed hand-built CNN fixture: conv, pooling and dense layers, int32 logits."""
    model = env.store.get(env.store.put(ROOT / "fixtures/cvm/tiny_cnn.cvm"))
    return model, np.load(ROOT / "fixtures/cvm/tiny_cnn_input.npy")


def test_precompile_returns_the_model_output(env, tiny_cnn):
    model, x = tiny_cnn
    for batch in (x[:1], x):
        out = env.w3.eth.call({"to": PRECOMPILE, "data": model.hash + model.encode_input(batch)})
        assert bytes(out) == model.encode_output(model.run(batch, backend="reference"))


def test_precompile_charges_model_gas_plus_bytes(env, tiny_cnn):
    model, x = tiny_cnn
    data = model.hash + model.encode_input(x)  # a batch of 4
    expected = CALL_BASE_GAS + model.gas * len(x) + GAS_PER_BYTE * (len(x) * 64 + len(x) * 40)
    assert precompile_gas(model, len(data) - 32) == expected
    needed = intrinsic_gas(data) + expected
    r = send_to_precompile(env, data, gas=needed)
    assert r["status"] == 1 and r["gasUsed"] == needed


def test_too_little_gas_fails_and_consumes_it(env, tiny_cnn):
    model, x = tiny_cnn
    data = model.hash + model.encode_input(x[:1])
    gas = intrinsic_gas(data) + precompile_gas(model, 64) - 1
    r = send_to_precompile(env, data, gas=gas)
    assert r["status"] == 0 and r["gasUsed"] == gas


@pytest.mark.parametrize("case", ["unknown model", "wrong input length", "short call", "empty input",
                                  "value out of range"])
def test_bad_calls_fail_cleanly(env, tiny_cnn, case):
    model, x = tiny_cnn
    good = model.encode_input(x[:1])
    data = {
        "unknown model": b"\x13" * 32 + good,
        "wrong input length": model.hash + good + b"\x00",
        "short call": model.hash[:20],
        "empty input": model.hash,
        "value out of range": model.hash + b"\x80" + good[1:],  # -128 is outside 8 bits' [-127, 127]
    }[case]
    gas = 500_000
    nonce = env.w3.eth.get_transaction_count(env.player.address)
    r = send_to_precompile(env, data, gas=gas)
    assert r["status"] == 0 and r["gasUsed"] == gas  # failed, all gas consumed
    assert env.w3.eth.get_transaction_count(env.player.address) == nonce + 1
    with pytest.raises(REVERT_ERRORS):
        env.w3.eth.call({"to": PRECOMPILE, "data": data})


def test_failure_is_returned_to_the_calling_contract(env, tiny_cnn):
    """A contract sees a failed precompile call as `false`, loses only the gas it forwarded,
    and goes on; through ICVM it reverts with a named error."""
    model, x = tiny_cnn
    caller, _ = deploy(env.w3, env.deployer, "PrecompileCaller", directory=TEST_ARTIFACTS)
    good = model.encode_input(x[:1])
    forwarded = 100_000
    r = env.send(env.player, caller.functions.callRaw(model.hash + good + b"\x01", forwarded), gas=400_000)
    assert r["status"] == 1 and r["gasUsed"] > forwarded
    assert caller.functions.calls().call() == 1 and caller.functions.lastOk().call() is False
    assert caller.functions.lastOutput().call() == b""

    env.send(env.player, caller.functions.callRaw(model.hash + good, forwarded), gas=400_000)
    assert caller.functions.lastOk().call() is True
    assert caller.functions.lastOutput().call() == model.encode_output(model.run(x[:1], backend=BACKEND))

    assert caller.functions.infer(model.hash, good).call() == caller.functions.lastOutput().call()
    with reverts("CVMCallFailed") as e:
        env.send(env.player, caller.functions.infer(b"\x13" * 32, good))
    assert e.value.error_args == (b"\x13" * 32,)


def test_digit_game_plays_through_the_precompile(env, tiny_cnn):
    model, x = tiny_cnn
    register_model(env.registry, env.deployer, model)
    game, _ = deploy(env.w3, env.deployer, "DigitGame", env.oracle.address, model.hash, 10**15, 0, value=10**16)
    expected = model.run(x, backend="reference")
    for i in range(len(x)):
        want = int(np.argmax(expected[i]))
        predicted, won = game.functions.playNow(model.encode_input(x[i:i + 1]), want).call({"from": env.player.address})
        assert (predicted, won) == (want, True)
    env.send(env.player, game.functions.playNow(model.encode_input(x[:1]), int(np.argmax(expected[0]))))
    assert game.functions.wins(env.player.address).call() == 1
    assert game.functions.prizes(env.player.address).call() == 10**15
    with reverts("CVMCallFailed"):
        env.send(env.player, game.functions.playNow(model.encode_input(x[:1])[:-1], 0))


@pytest.mark.parametrize("name", ["mnist_cnn", "digits_mlp"])
def test_committed_models_through_the_precompile(env, name):
    """Real converted models on real test images: the precompile gives the bytes Model.run gives."""
    model = env.store.get(env.store.put(ROOT / f"fixtures/models/{name}.cvm"))
    test = np.load(ROOT / f"fixtures/data/{name}_test.npz")
    x = model.quantize_input(test["x"][:8].reshape((8, *model.inputs[0].shape[1:])))
    out = bytes(env.w3.eth.call({"to": PRECOMPILE, "data": model.hash + model.encode_input(x)}))
    y = model.run(x, backend="reference")
    assert out == model.encode_output(y)
    assert (np.argmax(model.decode_output(out), axis=1) == test["y"][:8]).mean() >= 0.75
