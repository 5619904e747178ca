"""The arguments of the Solidity referee (contracts/src/Referee.sol): which input and constant
elements one output element of a node reads, and their words with Merkle multiproofs.

DisputeGame bisects a disputed tensor down to one 32-byte word where the two parties differ, takes
the first element of that word where they differ, and has the referee recompute it from the node's
spec (cvm/chain/model_commitment.py) and the operands given here. The index rules below mirror
Referee.sol's reads op by op (one row per op in cvm/chain/referee_ops.py): an element the referee
reads whose word is not given reverts (MissingWord), so the two must agree.
"""

from __future__ import annotations

from cvm.chain import contracts
from cvm.chain import referee_commitment as mc
from cvm.chain import trace
from cvm.chain.referee_ops import BY_CODE
from cvm.chain.trace import WORD, Trace

NONE = mc.ACTIVATION_NONE


def needed(spec: mc.NodeSpec, e: int, value=None) -> list[list[int]]:
    """For each input position, the element indices the referee reads to compute output element e
    (cvm/chain/referee_ops.py, the op's row). `value(pos, k)`: an input's element, for the ops whose
    reads depend on values (lut, gather); without it their table read is left out."""
    op = BY_CODE.get(spec.op)
    if op is None:
        raise mc.NotRefereed(f"op code {spec.op} has no referee")
    return op.reads(spec.params, e, len(spec.act), value)


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


def element_reads(t: Trace, spec: mc.NodeSpec, e: int) -> list[list[int]]:
    """`needed` with the values of this trace (the table entry a lut or gather element reads)."""
    if e >= spec.out_numel:
        return [[] for _ in spec.act]  # padding past the tensor's end: nothing to read
    return needed(spec, e, lambda pos, k: int(t.tensors[spec.act[pos]].reshape(-1)[k]))


def element_args(t: Trace, spec: mc.NodeSpec, leaf_index: int, e: int):
    """DisputeGame.resolveElement's arguments after the spec: (operands, leaf proofs) for output
    element e of the node making `leaf_index` (whose spec is `spec`), from this party's trace."""
    model = t.model
    node = model.graph.nodes[leaf_index - len(model.graph.inputs)]
    elems = element_reads(t, spec, e)
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


def word_nodes(t: Trace, d: dict) -> list[bytes]:
    """This party's bisectWords nodes: the 2^j nodes j = min(WORD_LEVELS, levels left) levels below
    its current node (`d["word"]` at height `d["wlevel"]`) of the disputed tensor's word tree."""
    j = min(mc.WORD_LEVELS, d["wlevel"])
    below = t.tensor_levels(d["index"])[d["wlevel"] - j]
    return below[d["word"] << j:(d["word"] + 1) << j]


def posted_words(game, dispute_id: int, party: str) -> list[bytes]:
    """The nodes `party` posted in this round (its latest WordsPosted: it has moved and the round is
    not over), which the second mover passes back to the game as `theirs`."""
    logs = game.events.WordsPosted().get_logs(from_block=0, argument_filters={"disputeId": dispute_id})
    mine = [e for e in logs if e["args"]["party"] == party]
    if not mine:
        raise ValueError(f"dispute {dispute_id}: {party} moved but posted no words")
    return [bytes(n) for n in mine[-1]["args"]["nodes"]]


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
    """A Disputant's move in the phases that the referee adds, and the step of an input leaf (its word
    root, computed on chain from its slice of the request's input) or of a padding leaf."""
    game, w3, account = disputant.game, disputant.w3, disputant.account
    send = getattr(disputant, "send", None) or contracts.send
    phase, me = d["phase"], account.address
    if phase == STEP:
        index = d["index"]
        if index < len(t.model.graph.inputs) or index >= d["leafCount"]:
            data = t.input_bytes if index < d["leafCount"] else b""
            send(w3, account, game.functions.resolveStep(dispute_id, data, []),
                           gas=MOVE_GAS + 40 * len(data))
            return "step"
        c = commitment_of(t.model)  # every node has a spec: commit refuses a model with one it cannot judge
        call = game.functions.openNode(dispute_id, c.specs[index].as_tuple(), c.proof(index))
        send(w3, account, call, gas=MOVE_GAS)
        return "open-node"
    if phase == INNER:
        if me not in (d["challenger"], d["defender"]) or (d["movedC"] if me == d["challenger"] else d["movedD"]):
            return None
        mine = word_nodes(t, d)
        other = d["defender"] if me == d["challenger"] else d["challenger"]
        theirs = posted_words(game, dispute_id, other) if (d["movedD"] if me == d["challenger"] else d["movedC"]) else []
        call = game.functions.bisectWords(dispute_id, mine, theirs)
        send(w3, account, call, gas=MOVE_GAS + 2_000 * len(mine))
        return "bisect-word"
    if phase == ELEMENT:
        c = commitment_of(t.model)
        spec = c.specs[d["index"]]
        j = first_difference(bytes(d["nodeC"]), bytes(d["nodeD"]), spec.out_size)
        ops, proofs = element_args(t, spec, d["index"], d["word"] * (WORD // spec.out_size) + j)
        call = game.functions.resolveElement(dispute_id, spec.as_tuple(), ops, proofs)
        send(w3, account, call, gas=_estimated(disputant, call))
        return "element"
    return None
