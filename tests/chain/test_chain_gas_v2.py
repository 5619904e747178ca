"""The oracle's fee and the registry under gas schedule v2: a model written in opset 3 registers its
schedule-v2 gas (Model.gas under its own opset) and its fee follows from that, with nothing in the
contracts or the node knowing about schedules; the opset-1 model beside it keeps its v1 gas and fee."""

import pytest
from chainkit import CONFIG

from cvm import gas_v2
from cvm.chain.contracts import call_struct, register_model
from cvm.repricing import repriced

pytestmark = pytest.mark.chain


def test_opset_3_model_registers_its_v2_gas_and_pays_a_fee_from_it(env):
    v1 = env.model
    v3 = repriced(v1, 3)
    assert v1.graph.opset == 1 and v3.graph.opset == 3 and v3.gas < v1.gas
    register_model(env.registry, env.player, v3)
    assert call_struct(env.registry.functions.getModel(v3.hash))["gas"] == v3.gas == gas_v2.model_gas(v1)
    assert call_struct(env.registry.functions.getModel(v1.hash))["gas"] == v1.gas
    fee1, fee3 = (env.oracle.functions.feeFor(m.hash).call() for m in (v1, v3))
    assert fee1 - fee3 == CONFIG.fee_per_gas * (v1.gas - v3.gas)


def test_precompile_charges_an_opset_3_model_by_schedule_v2(env):
    """The committed tiny CNN written in opset 3: the precompile runs it to the same output and charges
    CALL + B * v2 gas + one gas per 16 input and output bytes (docs/spec.md 16.2), exactly (or the
    calldata floor when that is more)."""
    import numpy as np
    from chainkit import ROOT
    from test_chain_precompile import PRECOMPILE, intrinsic_gas, send_to_precompile

    import cvm
    from cvm.chain.precompile import precompile_gas
    v1 = cvm.load(ROOT / "fixtures/cvm/tiny_cnn.cvm")
    v3 = repriced(v1, 3)
    model = env.store.get(env.store.put(v3))
    x = np.load(ROOT / "fixtures/cvm/tiny_cnn_input.npy")
    data = model.hash + model.encode_input(x)  # a batch of 4
    expected = gas_v2.CALL + v3.gas * len(x) + -(-(len(x) * (64 + 40)) // 16)
    assert precompile_gas(model, len(data) - 32) == expected < precompile_gas(v1, len(data) - 32)
    out = env.w3.eth.call({"to": PRECOMPILE, "data": data})
    assert bytes(out) == v1.encode_output(v1.run(x, backend="reference"))
    needed = intrinsic_gas(data) + expected
    # a call this cheap falls under the transaction's calldata floor (EIP-7623: 21,000 + 10 per token,
    # a zero byte one token, any other byte four), which the chain charges instead when it is more
    floor = 21_000 + 10 * (data.count(0) + 4 * (len(data) - data.count(0)))
    r = send_to_precompile(env, data, gas=max(needed, floor))
    assert r["status"] == 1 and r["gasUsed"] == max(needed, floor)
