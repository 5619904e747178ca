"""The dispute game on the embedded chain: one honest operator against a colluding majority.

The MNIST CNN of the fixtures (16 trace leaves, depth 4): two colluding operators reveal a forged
output with a forged trace that differs from the true one from node 4 on; the honest one disputes,
the game bisects to leaf 5 and re-executes node 4 through the trace precompile. The forged vote is
refuted, both colluders are slashed (half of each bond to the honest operator), and after the
challenge window the honest output is final and the consumer gets it."""

from pathlib import Path

import numpy as np
import pytest
from chainkit import BACKEND, CONFIG, make_env, reverts

from cvm.chain.contracts import TxFailed
from web3 import Web3
from web3.logs import DISCARD

import cvm
from cvm.chain.disputant import Claim, Disputant, Phase
from cvm.chain.node import Status
from cvm.chain.trace import Trace, leaf, merkle_levels, merkle_proof, run_trace, step, verify_proof, word_root

pytestmark = pytest.mark.chain
ROOT = Path(__file__).parents[2]
CNN = ROOT / "fixtures" / "models" / "mnist_cnn.cvm"
WINDOW = 500
FORGED_LEAF = 5


@pytest.fixture
def cnn_env(tmp_path):
    if not CNN.exists():
        pytest.skip(f"{CNN} is not committed")
    return make_env(tmp_path, model=cvm.load(CNN))


def forged(trace: Trace, index: int) -> Trace:
    """The trace with one tensor changed (its first element moved by one, inside its range) and the
    output changed too: what a colluder who did not compute the model would commit to."""
    tensors = [t.copy() for t in trace.tensors]
    flat = tensors[index].reshape(-1)
    flat[0] = flat[0] - 1 if flat[0] > 0 else flat[0] + 1
    out = tensors[-1].reshape(-1)
    out[0] = out[0] + 1 if out[0] < 100 else out[0] - 1
    return Trace(trace.model, tensors, merkle_levels([leaf(t) for t in tensors]))


def claim_of(model, trace: Trace) -> Claim:
    output = model.encode_output(trace.output)
    return Claim(cvm.output_hash(trace.output), Web3.keccak(output), trace.root)


def test_trace_helpers_agree_with_the_run(cnn_env):
    model = cnn_env.model
    x = np.random.default_rng(0).integers(-127, 128, (1, *model.inputs[0].shape[1:])).astype(np.int8)
    t = run_trace(model, x)
    assert len(t.tensors) == len(model.graph.nodes) + 1 and t.depth == 4
    assert t.leaves[0] == word_root(model.encode_input(x))  # a tensor's leaf is its word root
    assert t.leaves[-1] == word_root(model.encode_output(model.run(x, backend=BACKEND)))
    for i in range(1, len(t.tensors)):  # every step re-executed from its inputs gives the next leaf
        data, proofs = t.step_inputs(i)
        out, producers, leaves = step(model, i, data)
        assert out == t.leaves[i] and all(p < i for p in producers)
        assert all(verify_proof(t.root, lf, p, pr) for lf, p, pr in zip(leaves, producers, proofs))
    assert verify_proof(t.root, t.leaves[3], 3, merkle_proof(t.levels, 3))


def test_one_honest_operator_beats_a_colluding_majority(cnn_env, salts):
    env = cnn_env
    model = env.model
    env.stake_all()
    liar_a, liar_b, honest = env.operators[:3]
    x = np.random.default_rng(1).integers(-127, 128, (1, *model.inputs[0].shape[1:])).astype(np.int8)
    true_trace = run_trace(model, x)
    fake = forged(true_trace, FORGED_LEAF)
    consumer, _ = env.deploy_test("TestConsumer", env.oracle.address, 0)
    r = env.send(env.player, consumer.functions.requestWithWindow(model.hash, model.encode_input(x), WINDOW),
                 value=env.fee)
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]

    plays = {liar_a: fake, liar_b: fake, honest: true_trace}
    for (op, t), salt in zip(plays.items(), salts):
        c = claim_of(model, t)
        env.commit(op, rid, c.output_hash, salt, c.trace_root, output=model.encode_output(t.output))
    for (op, t), salt in zip(plays.items(), salts):
        c = claim_of(model, t)
        env.reveal(op, rid, c.output_hash, salt, model.encode_output(t.output), c.trace_root)
    assert env.request_state(rid)["status"] == Status.PENDING  # 2 equal votes, but the window is open

    players = {op: Disputant(env.w3, op, env.oracle) for op in plays}
    dispute_id = players[honest].open(rid, liar_a.address, claim_of(model, true_trace), claim_of(model, fake))
    game = players[honest].game
    for _ in range(20):  # each side plays its own trace; the liar plays its forgery consistently
        for op, t in plays.items():
            if op is liar_b:
                continue
            try:
                players[op].move(dispute_id, t)
            except TxFailed as e:  # the liar cannot prove its inputs against the agreed part of the trace
                assert op is liar_a and e.error == "BadProof"
        d = game.functions.getDispute(dispute_id).call()
        if d[5] == Phase.RESOLVED:
            break
    d = game.functions.getDispute(dispute_id).call()
    assert d[5] == Phase.RESOLVED and d[11] == FORGED_LEAF  # bisected to the forged tensor's leaf
    resolved = game.events.DisputeResolved().get_logs(from_block=0)[0]["args"]
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True)

    bond = CONFIG.slash_amount
    assert env.stake_of(liar_a) == env.stake_of(liar_b) == CONFIG.min_stake - bond  # both colluders
    assert env.stake_of(honest) == CONFIG.min_stake
    assert env.claimable(honest.address) == bond  # half of each of the two bonds
    env.chain.advance_time(CONFIG.commit_window + CONFIG.reveal_window + 1)
    with reverts("ChallengeWindowOpen"):
        env.send(honest, env.oracle.functions.finalize(rid, b"\0" * 32, b"\0" * 32, b""))

    env.chain.advance_time(WINDOW)
    c = claim_of(model, true_trace)
    out = model.encode_output(true_trace.output)
    fake_out = model.encode_output(fake.output)
    with reverts("NoUniqueResult"):  # the refuted vote cannot be finalised
        env.send(honest, env.oracle.functions.finalize(rid, claim_of(model, fake).output_hash, fake.root, fake_out))
    gas = env.oracle.functions.revealGas(len(out)).call()
    r = env.send(honest, env.oracle.functions.finalize(rid, c.output_hash, c.trace_root, out), gas=gas)
    state = env.request_state(rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == c.output_hash
    assert env.oracle.events.CallbackResult().process_receipt(r, errors=DISCARD)[0]["args"]["success"]
    assert consumer.functions.lastOutput().call() == out
    assert env.claimable(honest.address) == bond + env.fee  # the whole fee: the callback's gas and the share


def test_a_silent_party_loses_by_timeout(cnn_env, salts):
    env = cnn_env
    model = env.model
    env.stake_all()
    liar, honest = env.operators[:2]
    x = np.zeros((1, *model.inputs[0].shape[1:]), np.int8)
    t = run_trace(model, x)
    fake = forged(t, 2)
    rid = env.request(model.encode_input(x))
    for op, tr, salt in ((liar, fake, salts[0]), (honest, t, salts[1])):
        c = claim_of(model, tr)
        env.commit(op, rid, c.output_hash, salt, c.trace_root, output=model.encode_output(tr.output))
    env.chain.advance_time(CONFIG.commit_window + 1)
    for op, tr, salt in ((liar, fake, salts[0]), (honest, t, salts[1])):
        c = claim_of(model, tr)
        env.reveal(op, rid, c.output_hash, salt, model.encode_output(tr.output), c.trace_root)
    player = Disputant(env.w3, honest, env.oracle)
    dispute_id = player.open(rid, liar.address, claim_of(model, t), claim_of(model, fake))
    assert player.move(dispute_id, t) == "bisect" and player.move(dispute_id, t) is None  # the liar stays silent
    with reverts("DisputesOpen"):
        env.chain.advance_time(CONFIG.reveal_window + 1)
        env.send(honest, env.oracle.functions.settle(rid))
    env.chain.advance_time(CONFIG.dispute_move_time + 1)
    assert player.move(dispute_id, t) == "timeout"
    assert env.stake_of(liar) == CONFIG.min_stake - CONFIG.slash_amount and env.stake_of(honest) == CONFIG.min_stake
    env.send(honest, env.oracle.functions.settle(rid))  # no quorum, window 0: expired, bonds released
    assert env.oracle.functions.operators(honest.address).call()[3] == 0
