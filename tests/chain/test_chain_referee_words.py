"""The referee's word bisection, WORD_LEVELS (5) levels of the disputed tensor's word tree per round
(DisputeGame.bisectWords: each party posts the 32 nodes 5 levels below its current node), so that
disputes about resnet_cifar (a 6-level trace, [32, 32, 32] int32 conv outputs: a 12-level word tree,
3 rounds) and the converted rnn_ocr_bilstm (a 12-level trace, a 14-level word tree: 3 rounds) fit the
game's 16 moves. On anvil:

- two colluders reveal a trace forged at a conv output (resnet_cifar: 4,096 words; rnn_ocr_bilstm:
  its first node, over 8,192 words: 14 levels); one honest operator disputes; the game bisects the
  trace, then the words 5 levels a round, and the referee recomputes one conv2d element: the
  colluders lose;
- a party that does not post its words in a round loses alone (timeout), the one that did keeps its bond.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chainkit import CONFIG, TEST_ARTIFACTS, past_commit_deadline
from test_chain_referee import _advance, _anvil_env
from test_chain_referee_ops import STAKE, Game, claim_of, forged_at, play
from web3.logs import DISCARD

import cvm
from cvm.chain import model_commitment as mc
from cvm.chain.contracts import call_struct, deploy, deploy_oracle, register_model, send
from cvm.chain.disputant import Disputant, Phase
from cvm.chain.node import commitment
from cvm.chain.trace import run_trace

pytestmark = [pytest.mark.chain, pytest.mark.anvil]
ROOT = Path(__file__).parents[2]
RESNET = ROOT / "fixtures" / "models" / "resnet_cifar.cvm"
CONV_LEAF = 4  # node 3, conv2d: [32, 32, 32] int32, 4,096 words
BILSTM = ROOT / "fixtures" / "models" / "rnn_ocr_bilstm.onnx"
BILSTM_CALIB = ROOT / "fixtures" / "data" / "rnn_ocr_bilstm_calib.npz"


@pytest.fixture(scope="module")
def resnet() -> cvm.Model:
    if not RESNET.exists():
        pytest.skip(f"{RESNET} is not committed")
    return cvm.load(RESNET)


@pytest.fixture(scope="module")
def anvil_chain(tmp_path_factory):
    from test_chain_anvil import running_anvil
    with running_anvil(tmp_path_factory.mktemp("anvil")) as chain:
        yield chain


@pytest.fixture(scope="module")
def game(anvil_chain, resnet) -> Game:
    w3, keys = _anvil_env(anvil_chain)
    deployer, liar_a, liar_b, honest, player = keys[:5]
    dep = deploy_oracle(w3, deployer, CONFIG)
    register_model(dep.registry, deployer, resnet)
    mc.publish(w3, dep.registry, deployer, resnet)
    for op in (liar_a, liar_b, honest):
        send(w3, op, dep.oracle.functions.stake(), value=STAKE)
    consumer, _ = deploy(w3, deployer, "TestConsumer", dep.oracle.address, 0, directory=TEST_ARTIFACTS)
    return Game(w3, dep, consumer, deployer, (liar_a, liar_b), honest, player)


def x_of(model: cvm.Model, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, (1, *model.inputs[0].shape[1:])).astype(np.int8)


def test_the_words_of_resnet_fit_the_moves(resnet):
    spec = mc.commit(resnet).specs[CONV_LEAF]  # refused before: 6 trace + 12 word levels > 16 moves
    assert spec.out_numel * spec.out_size == 4096 * 32


def test_a_resnet_trace_forged_at_a_conv_loses_to_one_honest_operator(game, resnet, salts):
    mc.require_served(game.w3, game.dep.registry, resnet)
    d, moves, resolved = play(game, resnet, x_of(resnet, 1), CONV_LEAF, salts)
    assert d["phase"] == Phase.RESOLVED and d["referee"] and d["index"] == CONV_LEAF, moves
    assert moves.count("bisect-word") == 6 and "element" in moves, moves  # 3 rounds of 4 levels, two parties
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True), resolved
    assert [game.stake(who) for who in game.liars] == [STAKE - CONFIG.slash_amount] * 2
    assert game.stake(game.honest) == STAKE
    print(f"\nresnet_cifar, conv2d at leaf {CONV_LEAF}: resolveElement {resolved['gas']:,} gas; {len(moves)} moves: "
          f"{moves}")


@pytest.fixture(scope="module")
def bilstm() -> tuple[cvm.Model, np.ndarray]:
    """rnn_ocr_bilstm converted as tests/mrt/test_rnn_fixtures.py does (about 6 s), and one calibration image."""
    pytest.importorskip("onnx")
    if not (BILSTM.exists() and BILSTM_CALIB.exists()):
        pytest.skip(f"{BILSTM} or {BILSTM_CALIB} is missing")
    from mrt.pipeline import convert
    calib = np.load(BILSTM_CALIB)["x"]
    model = convert(BILSTM, calib, progress=False)
    return model, model.quantize_input(calib[:1])


def test_a_bilstm_trace_forged_at_its_first_conv_loses_to_one_honest_operator(game, bilstm, salts):
    model, x = bilstm
    c = mc.commit(model)  # refused with 2-level rounds: 12 trace + 14 word levels
    first = len(model.graph.inputs)
    assert model.graph.nodes[0].op == "conv2d" and c.specs[first].out_numel * c.specs[first].out_size > 1 << 18
    register_model(game.dep.registry, game.deployer, model)
    mc.publish(game.w3, game.dep.registry, game.deployer, model)
    d, moves, resolved = play(game, model, x, first, salts)
    assert d["phase"] == Phase.RESOLVED and d["referee"] and d["index"] == first, moves
    assert moves.count("bisect-word") == 6 and "element" in moves, moves
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True), resolved
    assert game.stake(game.honest) == STAKE
    print(f"\nrnn_ocr_bilstm, conv2d at leaf {first}: resolveElement {resolved['gas']:,} gas; {len(moves)} moves")


def test_a_party_silent_in_a_word_round_loses_alone(game, resnet, salts):
    w3, oracle, (liar_a, liar_b), honest = game.w3, game.dep.oracle, game.liars, game.honest
    x = x_of(resnet, 2)
    true_trace = run_trace(resnet, x)
    fake = forged_at(true_trace, CONV_LEAF)
    plays = {liar_a: fake, liar_b: fake, honest: true_trace}
    for op in plays:
        if game.stake(op) < STAKE:
            send(w3, op, oracle.functions.stake(), value=STAKE - game.stake(op))
    r = send(w3, game.player, game.consumer.functions.requestWithWindow(resnet.hash, resnet.encode_input(x), 500),
             value=oracle.functions.feeFor(resnet.hash).call(), gas=2_000_000)
    rid = oracle.events.InferenceRequested().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]
    for (op, t), salt in zip(plays.items(), salts):
        c = claim_of(resnet, t)
        send(w3, op, oracle.functions.commit(rid, commitment(rid, c.output_hash, c.trace_root, salt, op.address,
                                                            resnet.encode_output(t.output))),
             gas=300_000)
    past_commit_deadline(w3, oracle, rid)
    for (op, t), salt in zip(plays.items(), salts):
        c, out = claim_of(resnet, t), resnet.encode_output(t.output)
        send(w3, op, oracle.functions.reveal(rid, c.output_hash, c.trace_root, salt, out),
             gas=oracle.functions.revealGas(len(out)).call())
    players = {op: Disputant(w3, op, oracle) for op in (liar_a, honest)}
    dispute_id = players[honest].open(rid, liar_a.address, claim_of(resnet, true_trace), claim_of(resnet, fake))
    contract = players[honest].game
    for _ in range(40):  # both play until the word bisection starts
        for op in (liar_a, honest):
            if call_struct(contract.functions.getDispute(dispute_id))["phase"] != Phase.INNER:
                players[op].move(dispute_id, plays[op])
    assert players[honest].move(dispute_id, true_trace) == "bisect-word"  # the honest posts; the liar stays silent
    _advance(w3, CONFIG.dispute_move_time + 1)
    assert players[honest].move(dispute_id, true_trace) == "timeout"
    resolved = contract.events.DisputeResolved().get_logs(from_block=0, argument_filters={"disputeId": dispute_id})
    assert (resolved[0]["args"]["challengerWrong"], resolved[0]["args"]["defenderWrong"]) == (False, True)
    assert game.stake(liar_a) == STAKE - CONFIG.slash_amount and game.stake(honest) == STAKE
