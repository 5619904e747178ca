"""Disputes about a model with several inputs: text_embedder (token ids and attention mask), converted
from its ONNX fixture as examples/similarity does. A request is one sample, each input's wire bytes
in model input order, concatenated (spec section 11); the trace's leaves 0..k-1 are the k inputs, and
DisputeGame.resolveStep computes an input leaf from its slice of the request's input (the sizes of
inputs 1.. registered with ModelRegistry.registerInputs).

On the embedded chain (trace precompile) and on anvil (Solidity referee), two colluders reveal a trace
forged at one leaf and one honest operator disputes: at input leaf 1 (a liar claiming another
attention mask than the request's) and at the node reading the mask. The colluders lose.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from chainkit import CONFIG, TEST_ARTIFACTS, make_env
from test_chain_referee_ops import STAKE, Game, forged_at, play
from web3 import Web3

import cvm
from cvm.chain import model_commitment as mc
from cvm.chain.contracts import TxFailed, deploy, deploy_oracle, register_model, send
from cvm.chain.disputant import Claim, Disputant, Phase
from cvm.chain.trace import run_trace, word_root

pytestmark = pytest.mark.chain
pytest.importorskip("onnx")
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "similarity"
sys.path.insert(0, str(EXAMPLE))
from similarity_chain import FIXTURE_DATA, FIXTURE_ONNX, convert_source, load_source, rows  # noqa: E402

WINDOW = 500
MASK_LEAF = 1  # the second input's leaf


@pytest.fixture(scope="module")
def embedder() -> tuple[cvm.Model, dict]:
    if not (FIXTURE_ONNX.exists() and FIXTURE_DATA.exists()):
        pytest.skip(f"{FIXTURE_ONNX} or {FIXTURE_DATA} is missing")
    source = load_source("fixture")
    return convert_source(source), rows(source, slice(0, 1))


def mask_reader(model: cvm.Model) -> int:
    """The trace leaf of the first node that reads the attention mask."""
    name = model.graph.inputs[MASK_LEAF].name
    k = next(i for i, n in enumerate(model.graph.nodes) if name in n.inputs)
    return k + len(model.graph.inputs)


def test_the_trace_and_the_commitment_hold_both_inputs(embedder):
    model, x = embedder
    t = run_trace(model, x)
    assert len(model.graph.inputs) == 2
    assert t.input_bytes == model.encode_input(x)  # the request's bytes: the inputs concatenated
    ids_bytes = model.inputs[0].dtype.itemsize * int(np.prod(model.inputs[0].shape[1:]))
    assert t.leaves[0] == word_root(t.input_bytes[:ids_bytes]) and t.leaves[1] == word_root(t.input_bytes[ids_bytes:])
    assert t.step_inputs(MASK_LEAF) == (t.input_bytes, [])
    c = mc.commit(model)
    assert set(c.specs) == set(range(2, c.leaf_count))  # zero leaves at both inputs
    assert MASK_LEAF in c.specs[mask_reader(model)].act


def claim_of(model, t) -> Claim:
    return Claim(cvm.output_hash(t.output), Web3.keccak(model.encode_output(t.output)), t.root)


@pytest.mark.parametrize("where", ["mask", "mask reader"])
def test_embedded_chain_a_forgery_loses_to_one_honest_operator(embedder, tmp_path, salts, where):
    model, x = embedder
    index = MASK_LEAF if where == "mask" else mask_reader(model)
    env = make_env(tmp_path, model=model)
    env.stake_all()
    liar_a, liar_b, honest = env.operators[:3]
    true_trace = run_trace(model, x)
    fake = forged_at(true_trace, index)
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, 0)
    r = env.send(env.player, consumer.functions.requestWithWindow(model.hash, model.encode_input(x), WINDOW),
                 value=env.oracle.functions.feeFor(model.hash).call())
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    plays = {liar_a: fake, liar_b: fake, honest: true_trace}
    for (op, t), salt in zip(plays.items(), salts):
        env.commit(op, rid, claim_of(model, t).output_hash, salt, t.root, output=model.encode_output(t.output))
    for (op, t), salt in zip(plays.items(), salts):
        env.reveal(op, rid, claim_of(model, t).output_hash, salt, model.encode_output(t.output), t.root)
    players = {op: Disputant(env.w3, op, env.oracle) for op in (liar_a, honest)}
    dispute_id = players[honest].open(rid, liar_a.address, claim_of(model, true_trace), claim_of(model, fake))
    game = players[honest].game
    for _ in range(30):
        for op in (liar_a, honest):
            try:
                players[op].move(dispute_id, plays[op])
            except TxFailed as e:  # the liar cannot prove its step's inputs against the agreed trace
                assert op is liar_a, e
        d = game.functions.getDispute(dispute_id).call()
        if d[5] == Phase.RESOLVED:
            break
    assert d[5] == Phase.RESOLVED and d[11] == index  # bisected to the forged leaf, re-executed there
    resolved = game.events.DisputeResolved().get_logs(from_block=0)[0]["args"]
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True)
    assert env.stake_of(liar_a) == env.stake_of(liar_b) == CONFIG.min_stake - CONFIG.slash_amount
    assert env.stake_of(honest) == CONFIG.min_stake


@pytest.fixture(scope="module")
def anvil_game(anvil_chain, embedder) -> Game:
    from test_chain_referee import _anvil_env
    w3, keys = _anvil_env(anvil_chain)
    deployer, liar_a, liar_b, honest, player = keys[:5]
    dep = deploy_oracle(w3, deployer, CONFIG)
    model = embedder[0]
    register_model(dep.registry, deployer, model)
    mc.publish(w3, dep.registry, deployer, model)
    for op in (liar_a, liar_b, honest):
        send(w3, op, dep.oracle.functions.stake(), value=STAKE)
    consumer, _ = deploy(w3, deployer, "TestConsumer", dep.oracle.address, 0, directory=TEST_ARTIFACTS)
    return Game(w3, dep, consumer, deployer, (liar_a, liar_b), honest, player)


@pytest.fixture(scope="module")
def anvil_chain(tmp_path_factory):
    from test_chain_anvil import running_anvil
    with running_anvil(tmp_path_factory.mktemp("anvil")) as chain:
        yield chain


@pytest.mark.anvil
@pytest.mark.parametrize("where", ["mask", "mask reader"])
def test_anvil_a_forgery_loses_to_one_honest_operator(anvil_game, embedder, salts, where):
    model, x = embedder
    index = MASK_LEAF if where == "mask" else mask_reader(model)
    mc.require_served(anvil_game.w3, anvil_game.dep.registry, model)  # published, and the model's
    d, moves, resolved = play(anvil_game, model, x, index, salts)
    assert d["phase"] == Phase.RESOLVED and d["referee"] and d["index"] == index, moves
    assert ("step" if where == "mask" else "element") in moves, moves
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True), resolved
    assert [anvil_game.stake(who) for who in anvil_game.liars] == [STAKE - CONFIG.slash_amount] * 2
    assert anvil_game.stake(anvil_game.honest) == STAKE
    print(f"\n{where}: leaf {index}, resolved with {resolved['gas']:,} gas; {len(moves)} moves")


@pytest.mark.anvil
def test_anvil_the_node_refuses_input_specs_registered_out_of_order(anvil_game):
    b = cvm.GraphBuilder()
    a, c = b.input("a", (2,), bits=8), b.input("c", (3,), bits=8)
    model = b.build(b.op("add", b.op("sum", a, axes=(0,), keepdims=1), b.op("sum", c, axes=(0,), keepdims=1)))
    game, registry = anvil_game, anvil_game.dep.registry
    swapped = SimpleNamespace(inputs=model.inputs[::-1], outputs=model.outputs, hash=model.hash, gas=model.gas,
                              meta=model.meta)  # the same bytes per request, cut at 3 instead of 2
    register_model(registry, game.deployer, swapped)
    mc.publish(game.w3, registry, game.deployer, model)
    with pytest.raises(mc.RefereeMismatch, match="the registry's input specs are not the model's inputs"):
        mc.require_served(game.w3, registry, model)


def test_the_trace_precompile_charges_the_schedule_of_the_models_opset():
    from cvm.chain.trace_precompile import INFO, STEP, trace_gas
    from cvm.ops import SCHEDULES
    for opset in (2, 3):
        b = cvm.GraphBuilder(opset=opset)
        model = b.build(b.op("relu", b.input("a", (4,), bits=8)))
        s = SCHEDULES[opset]
        assert trace_gas(model, INFO, 33) == s.call + s.io_gas(33)
        assert trace_gas(model, STEP, 41, 1) == s.call + s.io_gas(41) + int(model.analysis.node_costs[0])
    assert SCHEDULES[3].call < SCHEDULES[2].call  # schedule v2 (opset 3) is not v1's
