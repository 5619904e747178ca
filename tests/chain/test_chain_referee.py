"""The Solidity referee (contracts/src/Referee.sol) and the dispute game without the trace precompile.

- Referee.evaluate equals the reference interpreter on every node of the fixture models and of a
  model with the ops the fixtures lack (lut, sub, mul, div, clip, broadcasting, strided padded
  pooling, grouped dilated conv), on the first, a middle and the last element (embedded chain,
  which runs the same EVM code; the precompile plays no part in `evaluate`).
- On anvil (no CVM precompile): two colluders reveal a forged trace and output of the MNIST CNN; one
  honest operator disputes, the game bisects the trace to the forged tensor, then its words to one
  word, and the referee recomputes one conv2d output element: both colluders are slashed and the
  honest output is final after the challenge window.
- The referee's gas for the largest node of each op in the fixture models (anvil; printed, and the
  table in docs/chain.md comes from `pytest -s -k gas`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from chainkit import CONFIG, make_env, past_commit_deadline
from test_chain_anvil import MNEMONIC, running_anvil
from web3 import Web3
from web3.logs import DISCARD

import cvm
from cvm.chain import model_commitment as mc
from cvm.chain import referee, referee_gas
from cvm.chain.contracts import TxFailed, call_struct, deploy, deploy_oracle, register_model, send
from cvm.chain.disputant import Claim, Disputant, Phase
from cvm.chain.node import Status, commitment
from cvm.chain.trace import Trace, leaf, merkle_levels, run_trace, wire_bytes
from cvm.values import storage_dtype


@pytest.fixture
def anvil(tmp_path):
    """An anvil node (test_chain_anvil.running_anvil), stopped after the test."""
    with running_anvil(tmp_path) as chain:
        yield chain

pytestmark = pytest.mark.chain
ROOT = Path(__file__).parents[2]
FIXTURES = [ROOT / "fixtures/models/mnist_cnn.cvm", ROOT / "fixtures/cvm/tiny_cnn.cvm",
            ROOT / "fixtures/models/digits_mlp.cvm", ROOT / "fixtures/models/cancer_linear.cvm"]
CNN = FIXTURES[0]
WINDOW = 500
FORGED_LEAF = 5  # node 4: the 8 -> 16 channel conv2d


def other_ops_model() -> cvm.Model:
    """The ops of the referee that the fixtures lack, with broadcasting and odd geometry."""
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 5, 6), bits=8)
    w = b.const(np.arange(-18, 18).reshape(4, 1, 3, 3) % 17 - 8, "w", "int8")
    h = b.op("conv2d", x, w, pads=(2, 1, 0, 2), dilations=(2, 1), strides=(1, 2), groups=2)
    h = b.op("requant", h, b.const([3], "m", "int32"), shift=4, bits=8)
    h = b.op("max_pool2d", h, kernel=(2, 3), strides=(2, 1), pads=(1, 1, 1, 1))
    h = b.op("sub", h, b.const([[[5]], [[-3]], [[0]], [[7]]], "s", "int16"))
    h = b.op("mul", h, b.const([[1, -2, 3, -1]], "k", "int8"))
    h = b.op("clip", h, lo=-100, hi=90)
    h = b.op("lut", h, b.const(np.arange(-100, 91) * 3 // 2, "t", "int16"), offset=-100)
    h = b.op("div", h, b.const([[[3]]], "d", "int8"))
    h = b.op("add", h, h)
    h = b.op("reshape", h, shape=(8, 4))
    return b.build(b.op("relu", h))


@pytest.fixture(scope="module")
def embedded_referee(tmp_path_factory):
    env = make_env(tmp_path_factory.mktemp("referee"))
    contract, _ = deploy(env.w3, env.deployer, "Referee")
    return contract


def _model(path_or_model):
    return path_or_model if isinstance(path_or_model, cvm.Model) else cvm.load(path_or_model)


def _sample(model, seed=0):
    bits = model.graph.inputs[0].bits
    lim = 2 ** (bits - 1) - 1
    return np.random.default_rng(seed).integers(-lim, lim + 1, (1, *model.inputs[0].shape[1:])).astype(
        storage_dtype(bits))


def wide_recurrent_model() -> cvm.Model:
    """The digits GRU converted with today's defaults: 12-bit cells, 10-bit (int16) dense weights, 4,095-entry
    gate tables (mrt.recurrent_precision), which the committed 8-bit fixtures do not have."""
    from mrt.pipeline import convert
    calib = np.load(ROOT / "fixtures/data/rnn_digits_gru_calib.npz")["x"]
    return convert(ROOT / "fixtures/models/rnn_digits_gru.onnx", calib, progress=False)


BUILT = {"other_ops": other_ops_model, "wide_recurrent": wide_recurrent_model}


@pytest.mark.parametrize("which", [p.stem for p in FIXTURES] + sorted(BUILT))
def test_referee_equals_the_reference_on_every_node(embedded_referee, which):
    src = {p.stem: p for p in FIXTURES}.get(which)
    if src is not None and not src.exists():
        pytest.skip(f"{src} is not committed")
    model = BUILT[which]() if src is None else cvm.load(src)
    t = run_trace(model, _sample(model))
    c = mc.commit(model)
    assert set(c.specs) == set(range(1, c.leaf_count)), "every node of these models is refereed"
    for index, spec in c.specs.items():
        assert_referee_matches(embedded_referee, t, spec, index, sorted({0, spec.out_numel // 2, spec.out_numel - 1}))


def assert_referee_matches(contract, t: Trace, spec: mc.NodeSpec, index: int, elements) -> None:
    """Referee.evaluate gives the trace's value at each element, and each activation's word root."""
    flat = t.tensors[index].reshape(-1)
    for e in elements:
        ops, _ = referee.element_args(t, spec, index, e)
        value, roots = contract.functions.evaluate(spec.as_tuple(), e, ops).call()
        assert value == int(flat[e]), (index, t.model.graph.nodes[index - 1].op, e)
        for pos, producer in enumerate(spec.act):
            if producer != mc.ACTIVATION_NONE and ops[pos][0]:
                assert bytes(roots[pos]) == t.leaves[producer]


def _reverted_with(e: Exception, signature: str) -> bool:
    """Whether a reverted call's data starts with the custom error's selector (as hex data on a
    JSON-RPC node, as the bytes in the message on the embedded chain)."""
    sel = bytes(Web3.keccak(text=signature)[:4])
    data = str(getattr(e, "data", None) or "").removeprefix("0x")
    return data.startswith(sel.hex()) or f"b'{repr(sel)[2:-1]}" in str(e)


def test_referee_refuses_a_wrong_constant_and_a_missing_word(embedded_referee):
    model = cvm.load(CNN) if CNN.exists() else other_ops_model()
    t, c = run_trace(model, _sample(model)), mc.commit(model)
    index = max(c.specs, key=lambda i: sum(map(len, referee.needed(c.specs[i], 0))))
    spec = c.specs[index]
    ops, _ = referee.element_args(t, spec, index, 0)
    const = next(p for p, a in enumerate(spec.act) if a == mc.ACTIVATION_NONE)
    idx, words, proof = ops[const]
    bad = list(ops)
    bad[const] = (idx, [bytes(32)] + words[1:], proof)
    with pytest.raises(Exception) as info:
        embedded_referee.functions.evaluate(spec.as_tuple(), 0, bad).call()
    assert _reverted_with(info.value, "BadConstant(uint256)")
    act = next(p for p, a in enumerate(spec.act) if a != mc.ACTIVATION_NONE)
    assert len(ops[act][0]) > 1
    short = list(ops)  # only the first word of the activation, correctly proven
    short[act] = referee.operand(wire_bytes(t.tensors[spec.act[act]]), spec.size[act], [referee.needed(spec, 0)[act][0]])
    with pytest.raises(Exception) as info:
        embedded_referee.functions.evaluate(spec.as_tuple(), 0, short).call()
    assert _reverted_with(info.value, "MissingWord(uint256,uint256)")


def test_commitment_leaves_models_and_hashes_alone():
    model = cvm.load(CNN) if CNN.exists() else other_ops_model()
    before = model.hash
    c = mc.commit(model)
    assert model.hash == before and c.leaf_count == len(model.graph.nodes) + 1
    y = model.run(_sample(model), backend="reference")
    assert Web3.keccak(c.output_prefix + model.encode_output(y)) == cvm.output_hash(y)


# ---------------------------------------------------------------------------------------------- anvil

def _anvil_env(anvil):
    from eth_account import Account
    url, w3 = anvil
    Account.enable_unaudited_hdwallet_features()
    keys = [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(6)]
    return w3, keys


def _advance(w3, seconds: int) -> None:
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def forged(trace: Trace, index: int) -> Trace:
    """The trace with one tensor changed (an element in the middle moved by one) and the output too."""
    tensors = [t.copy() for t in trace.tensors]
    flat = tensors[index].reshape(-1)
    k = flat.size // 2 + 3
    flat[k] = flat[k] - 1 if flat[k] > 0 else flat[k] + 1
    out = tensors[-1].reshape(-1)
    out[0] = out[0] + 1 if out[0] < 100 else out[0] - 1
    return Trace(trace.model, tensors, merkle_levels([leaf(t) for t in tensors]))


def claim_of(model, trace: Trace) -> Claim:
    return Claim(cvm.output_hash(trace.output), Web3.keccak(model.encode_output(trace.output)), trace.root)


@pytest.mark.anvil
def test_one_honest_operator_beats_a_colluding_majority_on_anvil(anvil, salts):
    if not CNN.exists():
        pytest.skip(f"{CNN} is not committed")
    w3, keys = _anvil_env(anvil)
    deployer, liar_a, liar_b, honest, player = keys[:5]
    model = cvm.load(CNN)
    dep = deploy_oracle(w3, deployer, CONFIG)
    register_model(dep.registry, deployer, model)
    oracle = dep.oracle
    Disputant(w3, honest, oracle)  # constructing it checks the oracle's dispute game is reachable
    mc.publish(w3, dep.registry, deployer, model)
    assert mc.check_published(dep.registry, model)
    for op in (liar_a, liar_b, honest):
        send(w3, op, oracle.functions.stake(), value=CONFIG.min_stake)

    test = np.load(ROOT / "fixtures/data/mnist_cnn_test.npz")
    x = model.quantize_input(test["x"][3:4])
    true_trace = run_trace(model, x)
    fake = forged(true_trace, FORGED_LEAF)
    consumer, _ = deploy(w3, deployer, "TestConsumer", oracle.address, 0, directory=ROOT / "tests/chain/artifacts")
    r = send(w3, player, consumer.functions.requestWithWindow(model.hash, model.encode_input(x), WINDOW),
             value=oracle.functions.feeFor(model.hash).call(), gas=2_000_000)
    rid = oracle.events.InferenceRequested().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]

    plays = {liar_a: fake, liar_b: fake, honest: true_trace}
    for (op, t), salt in zip(plays.items(), salts):
        c = claim_of(model, t)
        send(w3, op, oracle.functions.commit(rid, commitment(rid, c.output_hash, c.trace_root, salt, op.address,
                                                            model.encode_output(t.output))),
             gas=300_000)
    past_commit_deadline(w3, oracle, rid)
    for (op, t), salt in zip(plays.items(), salts):
        c = claim_of(model, t)
        out = model.encode_output(t.output)
        send(w3, op, oracle.functions.reveal(rid, c.output_hash, c.trace_root, salt, out),
             gas=oracle.functions.revealGas(len(out)).call())
    assert call_struct(oracle.functions.getRequest(rid))["status"] == Status.PENDING

    players = {op: Disputant(w3, op, oracle) for op in (liar_a, honest)}
    dispute_id = players[honest].open(rid, liar_a.address, claim_of(model, true_trace), claim_of(model, fake))
    game = players[honest].game
    assert game.functions.getDispute(dispute_id).call()[-6]  # referee: true
    moves = []
    for _ in range(40):
        for op in (liar_a, honest):
            try:
                moves.append((op is honest, players[op].move(dispute_id, plays[op])))
            except TxFailed as e:  # the liar cannot prove its inputs against the agreed trace
                assert op is liar_a, e
                moves.append((False, e.error))
        if call_struct(game.functions.getDispute(dispute_id))["phase"] == Phase.RESOLVED:
            break
    d = call_struct(game.functions.getDispute(dispute_id))
    assert d["phase"] == Phase.RESOLVED and d["index"] == FORGED_LEAF and d["referee"], moves
    assert any(m == "open-node" for _, m in moves) and (True, "bisect-word") in moves, moves
    event = game.events.DisputeResolved().get_logs(from_block=0)[0]
    resolved = event["args"]
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True)
    gas = w3.eth.get_transaction_receipt(event["transactionHash"])["gasUsed"]
    print(f"\nresolveElement (a conv2d element of node {FORGED_LEAF - 1}, with the slashing): {gas:,} gas; "
          f"moves: {[m for _, m in moves]}")
    element = [m for m in moves if m[1] == "element"]
    assert element, moves

    bond = CONFIG.slash_amount
    stake = lambda op: oracle.functions.operators(op.address).call()[0]  # noqa: E731
    assert stake(liar_a) == stake(liar_b) == CONFIG.min_stake - bond
    assert stake(honest) == CONFIG.min_stake
    assert oracle.functions.claimable(honest.address).call() == bond

    _advance(w3, CONFIG.commit_window + CONFIG.reveal_window + WINDOW + 1)
    c = claim_of(model, true_trace)
    out = model.encode_output(true_trace.output)
    r = send(w3, honest, oracle.functions.finalize(rid, c.output_hash, c.trace_root, out),
             gas=oracle.functions.revealGas(len(out)).call())
    state = call_struct(oracle.functions.getRequest(rid))
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == c.output_hash
    assert consumer.functions.lastOutput().call() == out


@pytest.mark.anvil
def test_referee_gas_per_op_on_anvil(anvil):
    """Gas of Referee.evaluate (as a transaction) for the most expensive element of the costliest
    node of each op in the fixture models; printed for docs/chain.md (cvm/chain/referee_gas.py)."""
    w3, keys = _anvil_env(anvil)
    contract, _ = deploy(w3, keys[0], "Referee")
    models = {p.stem: cvm.load(p) for p in FIXTURES + [ROOT / "fixtures/models/resnet_cifar.cvm"] if p.exists()}
    rows = referee_gas.measure(contract, keys[0], models)
    assert {r.op for r in rows} == {n.op for m in models.values() for n in m.graph.nodes}
    assert all(r.gas < 5_000_000 for r in rows), rows
    print("\n" + referee_gas.table(rows))
