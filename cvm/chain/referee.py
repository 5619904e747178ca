"""The arguments of the Solidity referee (contracts/src/Referee.sol): which input and constant
elements one output element of a node reads, and their words with Merkle multiproofs.

DisputeGame bisects a disputed tensor down to one 32-byte word where the two parties differ, takes
the first element of that word where they differ, and has the referee recompute it from the node's
spec (cvm/chain/model_commitment.py) and the operands given here. The index rules below mirror
Referee.sol's reads op by op: an element the referee reads whose word is not given reverts
(MissingWord), so the two must agree.
"""

from __future__ import annotations

from cvm.chain import contracts
from cvm.chain import model_commitment as mc
from cvm.chain import trace
from cvm.chain.trace import WORD, Trace

NONE = mc.ACTIVATION_NONE


def _conv_taps(p, o, i, j):
    C, H, W, O, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, g = p
    cg, og = C // g, O // g
    gi = o // og
    xs, ws = [], []
    for c in range(cg):
        for u in range(KH):
            row = i * sh + u * dh - pt
            if not 0 <= row < H:
                continue
            for v in range(KW):
                col = j * sw + v * dw - pl
                if 0 <= col < W:
                    xs.append(((gi * cg + c) * H + row) * W + col)
                    ws.append(((o * cg + c) * KH + u) * KW + v)
    return xs, ws


def needed(spec: mc.NodeSpec, e: int) -> list[list[int]]:
    """For each input position, the element indices the referee reads to compute output element e."""
    op, p = spec.op, spec.params
    if op == 1:  # conv2d
        O, OH, OW = p[3], p[4], p[5]
        o, rest = divmod(e, OH * OW)
        xs, ws = _conv_taps(p, o, *divmod(rest, OW))
        return [xs, ws] + ([[o]] if len(spec.act) == 3 else [])
    if op == 2:  # dense
        K, O = p
        r, o = divmod(e, O)
        return [list(range(r * K, r * K + K)), list(range(o * K, o * K + K))] + ([[o]] if len(spec.act) == 3 else [])
    if op in (3, 4, 5, 6):  # broadcast binary
        r = p[0]
        out, a, b = p[1:1 + r], p[1 + r:1 + 2 * r], p[1 + 2 * r:1 + 3 * r]
        idx = []
        for dims in (a, b):
            rem, flat, stride = e, 0, 1
            for ax in range(r - 1, -1, -1):
                rem, k = divmod(rem, out[ax])
                if dims[ax] != 1:
                    flat += k * stride
                stride *= dims[ax]
            idx.append([flat])
        return idx
    if op == 9:  # requant
        m, stride, dim = p[2], p[3], p[4]
        return [[e], [(e // stride) % dim if m != 1 else 0]]
    if op == 10:  # lut: the table entry depends on the input's value; the caller adds it
        return [[e], []]
    if op == 11:  # max_pool2d
        C, H, W, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw = p
        c, rest = divmod(e, OH * OW)
        i, j = divmod(rest, OW)
        return [[(c * H + row) * W + col
                 for row in (i * sh + u * dh - pt for u in range(KH)) if 0 <= row < H
                 for col in (j * sw + v * dw - pl for v in range(KW)) if 0 <= col < W]]
    if op in (7, 8, 12):  # relu, clip, reshape/flatten
        return [[e]]
    raise mc.NotRefereed(f"op code {op} has no referee")


def operand(data: bytes, size: int, elements: list[int]) -> tuple[list[int], list[bytes], list[bytes]]:
    """(word indices, words, multiproof) covering the elements of a tensor given as wire bytes."""
    levels = trace.word_levels(data)
    idx = sorted({k * size // WORD for k in elements})
    return idx, [levels[0][w] for w in idx], trace.multiproof(levels, idx) if idx else []


def first_difference(word_c: bytes, word_d: bytes, size: int) -> int:
    """The first element of two differing words where their bytes differ (DisputeGame's rule)."""
    for j in range(WORD // size):
        if word_c[j * size:(j + 1) * size] != word_d[j * size:(j + 1) * size]:
            return j
    raise ValueError("the words do not differ")


def element_args(t: Trace, commitment: mc.Commitment, leaf_index: int, e: int):
    """DisputeGame.resolveElement's arguments after the spec: (operands, leaf proofs) for output
    element e of the node making `leaf_index`, from this party's trace."""
    spec = commitment.specs[leaf_index]
    model = t.model
    node = model.graph.nodes[leaf_index - len(model.graph.inputs)]
    elems = needed(spec, e) if e < spec.out_numel else [[] for _ in spec.act]
    if spec.op == 10 and e < spec.out_numel:  # lut: read the input, then the entry it selects
        x = int(t.tensors[spec.act[0]].reshape(-1)[e])
        elems[1] = [x - spec.params[0]]
    ops, proofs = [], []
    for pos, name in enumerate(node.inputs):
        if spec.act[pos] == NONE:
            data = trace.wire_bytes(model.graph.constants[name])
            proofs.append([])
        else:
            data = trace.wire_bytes(t.tensors[spec.act[pos]])
            proofs.append(trace.merkle_proof(t.levels, spec.act[pos]))
        ops.append(operand(data, spec.size[pos], elems[pos]))
    return ops, proofs


# DisputeGame.Phase values this module plays (cvm.chain.disputant.Phase has them all)
STEP, INNER, ELEMENT = 2, 5, 6
MOVE_GAS = 400_000
_commitments: dict[bytes, mc.Commitment] = {}


def commitment_of(model) -> mc.Commitment:
    """The model's referee commitment, computed once per process."""
    if model.hash not in _commitments:
        _commitments[model.hash] = mc.commit(model)
    return _commitments[model.hash]


def _estimated(disputant, call) -> int:
    """Gas for a referee call: its estimate plus a margin (its cost depends on the element)."""
    return call.estimate_gas({"from": disputant.account.address}) * 6 // 5 + 50_000


def move(disputant, dispute_id: int, d: dict, t: Trace) -> str | None:
    """A Disputant's move in the phases that the referee adds, and the step of leaf 0 (the input's
    word root, computed on chain from the input bytes) or of a padding leaf."""
    game, w3, account = disputant.game, disputant.w3, disputant.account
    send = getattr(disputant, "send", None) or contracts.send
    phase, me = d["phase"], account.address
    if phase == STEP:
        index = d["index"]
        if index == 0 or index >= d["leafCount"]:
            data = trace.wire_bytes(t.tensors[0]) if index == 0 else b""
            send(w3, account, game.functions.resolveStep(dispute_id, data, []),
                           gas=MOVE_GAS + 40 * len(data))
            return "step"
        c = commitment_of(t.model)
        if index not in c.specs:
            return None  # an op without a referee: the step times out
        call = game.functions.openNode(dispute_id, c.specs[index].as_tuple(), c.proof(index))
        send(w3, account, call, gas=MOVE_GAS)
        return "open-node"
    if phase == INNER:
        if me not in (d["challenger"], d["defender"]) or (d["movedC"] if me == d["challenger"] else d["movedD"]):
            return None
        below = t.tensor_levels(d["index"])[d["wlevel"] - 1]
        call = game.functions.bisect(dispute_id, below[2 * d["word"]], below[2 * d["word"] + 1])
        send(w3, account, call, gas=MOVE_GAS)
        return "bisect-word"
    if phase == ELEMENT:
        c = commitment_of(t.model)
        spec = c.specs[d["index"]]
        j = first_difference(bytes(d["nodeC"]), bytes(d["nodeD"]), spec.out_size)
        ops, proofs = element_args(t, c, d["index"], d["word"] * (WORD // spec.out_size) + j)
        call = game.functions.resolveElement(dispute_id, spec.as_tuple(), ops, proofs)
        send(w3, account, call, gas=_estimated(disputant, call))
        return "element"
    return None
