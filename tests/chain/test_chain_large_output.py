"""Attack 5 of issue 17, its last part: with an output of 256 KB or more, the consumer's callback used
to get less than its gas limit, because the 20,000 gas reserve did not cover encoding the output
into the call. InferenceOracle._callback now checks the gas left after encoding, so a finalising
reveal either gives the callback its whole callbackGasLimit or reverts.

The model: one `pad` of a 64 x 64 int8 input to 64 x 4160 (266,240 output bytes), registered and
served like any other. A GasProbe contract as the callback records the gas it arrived with.
- Three node.py operators run the request end to end; the probe got the whole limit.
- A finaliser who sends the finalising reveal with the least gas that succeeds (the embedded
  chain's estimate, within ESTIMATE_TOLERANCE of it) cannot shorten the callback: a little less
  reverts with InsufficientGasForCallback, and at the estimate the probe again gets the whole limit.
- The same round on BatchedOracle, through three batch nodes and the relay.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from chainkit import BACKEND, CONFIG, Env, make_env, reverts
from test_chain_node import make_operator, run_until_final
from web3.logs import DISCARD

import cvm
from cvm.chain import relay
from cvm.chain.batch import deploy_batched_oracle, latest_round
from cvm.chain.batch_node import BatchedOperator
from cvm.chain.contracts import register_model
from cvm.chain.embedded import ESTIMATE_TOLERANCE, EmbeddedChain
from cvm.chain.node import Status
from cvm.chain.states import DONE
from cvm.chain.store import ModelStore

pytestmark = pytest.mark.chain
OUTPUT_BYTES = 64 * 4160
# gas the probe spends before its first statement reads gasleft(): the dispatcher and the calldata
# checks of `bytes calldata` (429 measured; the tests print it)
ENTRY_OVERHEAD = 1_000
LARGEST_CALLBACK_GAS = 5_000_000  # InferenceOracle.MAX_CALLBACK_GAS


def large_output_model() -> cvm.Model:
    b = cvm.GraphBuilder()
    x = b.input("x", (64, 64), bits=8)
    return b.build(b.op("pad", x, pads=(0, 0, 0, 4160 - 64), value=-3, name="wide"))


@pytest.fixture
def env(tmp_path):
    e = make_env(tmp_path, model=large_output_model())
    e.stake_all(3)
    return e


def sample(model, seed: int) -> tuple[bytes, bytes]:
    x = np.random.default_rng(seed).integers(-127, 128, (1, 64, 64)).astype(np.int8)
    y = model.run(x, backend="reference")
    return model.encode_input(x), model.encode_output(y)


def test_the_model_output_is_over_256_kb(env):
    assert env.registry.functions.outputBytes(env.model.hash).call() == OUTPUT_BYTES >= 256 * 1024


def test_a_round_with_a_256_kb_output_gives_the_callback_its_whole_gas_limit(env, tmp_path):
    probe, _ = env.deploy_test("GasProbe")
    data, out = sample(env.model, 0)
    rid = env.request(data, callback=probe.address)
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    state = run_until_final(env, ops, rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == cvm.output_hash(
        env.model.decode_output(out))
    assert probe.functions.calls().call() == 1 and probe.functions.outputLength().call() == OUTPUT_BYTES
    entry = probe.functions.gasAtEntry().call()
    print(f"\ncallback of a {OUTPUT_BYTES:,}-byte output through the nodes: arrived with {entry:,} gas of "
          f"callbackGasLimit {CONFIG.callback_gas_limit:,}")
    assert CONFIG.callback_gas_limit - ENTRY_OVERHEAD <= entry <= CONFIG.callback_gas_limit


def test_the_least_gas_finaliser_cannot_shorten_the_callback(tmp_path, salts):
    """With the largest callback limit the constructor takes: the least gas that succeeds is then
    above EIP-7623's calldata floor for this output (about 10.7M), so no chain's floor hides the
    attack (py-evm does not require a gas limit to cover the floor; it charges it afterwards)."""
    config = replace(CONFIG, callback_gas_limit=LARGEST_CALLBACK_GAS)
    env = make_env(tmp_path, config, model=large_output_model())
    env.stake_all(3)
    probe, _ = env.deploy_test("GasProbe")
    data, out = sample(env.model, 1)
    h = cvm.output_hash(env.model.decode_output(out))
    rid = env.request(data, callback=probe.address)
    ops = env.operators[:3]
    for op in ops:
        env.commit(op, rid, h, salts[0])
    env.reveal(ops[0], rid, h, salts[0], out, gas=env.oracle.functions.revealGas(len(out)).call())
    finalising = env.oracle.functions.reveal(rid, h, bytes(32), salts[0], out)
    least = finalising.estimate_gas({"from": ops[1].address})  # at most ESTIMATE_TOLERANCE above the least
    assert least <= env.oracle.functions.revealGas(len(out)).call()  # the node's rule covers it

    with reverts("InsufficientGasForCallback"):  # below the least: no call with less gas, a revert
        env.send(ops[1], finalising, gas=least - ESTIMATE_TOLERANCE - 1)
    assert probe.functions.calls().call() == 0
    r = env.send(ops[1], finalising, gas=least)
    assert env.request_state(rid)["status"] == Status.FINALIZED and r["gasUsed"] <= least
    assert env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    entry = probe.functions.gasAtEntry().call()
    print(f"\nfinalising reveal at the least gas that succeeds ({least:,}, gas used {r['gasUsed']:,}): the callback "
          f"arrived with {entry:,} gas of {config.callback_gas_limit:,}")
    assert config.callback_gas_limit - ENTRY_OVERHEAD <= entry <= config.callback_gas_limit


def test_a_batched_round_with_a_256_kb_output_gives_the_callback_its_whole_gas_limit(tmp_path):
    """The same on BatchedOracle: three batch nodes, the openings (with the 266,240-byte output) through
    the relay, the finalising batch sent with revealGas plus the per-opening allowance."""
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(large_output_model()))
    chain = EmbeddedChain(store, backend="reference", num_accounts=10)
    dep = deploy_batched_oracle(chain.w3, chain.keys[0], CONFIG)
    register_model(dep.registry, chain.keys[0], model)
    env = Env(chain, store, model, dep, CONFIG)
    env.stake_all(3)
    probe, _ = env.deploy_test("GasProbe")
    data, out = sample(model, 2)
    r = env.send(env.player, env.oracle.functions.request(model.hash, data, probe.address), value=env.fee)
    rid = env.oracle.events.InferenceRequested().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]
    chain.mine()
    server = relay.serve(env.w3, [env.oracle.address], port=0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        ops = [BatchedOperator(env.w3, key, env.oracle.address, store, tmp_path / f"op{i}.sqlite", backend=BACKEND,
                               retry_delay=0.0, relay=url) for i, key in enumerate(env.operators[:3])]
        for i in range(10):
            for op in ops:
                op.step()
            if all(op.job(rid).state == DONE for op in ops):
                break
            if i == 0:  # the commits are signed: past the commit deadline, where reveals open
                chain.advance_time(CONFIG.commit_window + 1)
    finally:
        server.shutdown()
    final = latest_round(env.oracle, rid)
    assert final.status == Status.FINALIZED and all(op.job(rid).note == "finalised with our output" for op in ops)
    assert probe.functions.calls().call() == 1 and probe.functions.outputLength().call() == OUTPUT_BYTES
    entry = probe.functions.gasAtEntry().call()
    print(f"\nbatched: the callback of a {OUTPUT_BYTES:,}-byte output arrived with {entry:,} gas of "
          f"{CONFIG.callback_gas_limit:,}")
    assert CONFIG.callback_gas_limit - ENTRY_OVERHEAD <= entry <= CONFIG.callback_gas_limit
