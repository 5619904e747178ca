"""Execution traces for the oracle's dispute game: leaves, Merkle tree, proofs, one step.

A run's trace is every tensor it makes, in graph order: the model's input(s), then the output of
each node. Its leaf is the tensor's word root: the tensor's wire bytes (little-endian in its storage
type, one sample: what `Model.encode_input` / `encode_output` give for the input and the output),
zero-padded to 32-byte words, the words taken as the leaves of a Merkle tree (a word is its own
leaf, not hashed) padded with zero words to a power of two. A tensor of one word is its own root.
Words as leaves let the dispute game go on bisecting inside one tensor down to one word, and the
Solidity referee (contracts/src/Referee.sol) prove single elements; the inputs' and the output's
roots are computed on chain from their bytes (DisputeGame checks keccak256 of those bytes too: a
model with k inputs has leaves 0..k-1, each the word root of its slice of the request's input, the
inputs' wire bytes concatenated in model input order).
The trace root is the Merkle root over the leaves, padded with zero leaves to a power of two, each
parent keccak256(left ++ right).

Operators commit to the root; contracts/src/DisputeGame.sol bisects two roots to the first leaf
where they differ and re-executes that leaf with `step` (the embedded chain's trace precompile),
or, on a chain without it, bisects that tensor to one word and has the referee recompute one
element (cvm/chain/referee.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from eth_hash.auto import keccak

import cvm
from cvm.interp import reference
from cvm.ops import OPSETS
from cvm.values import storage_dtype

ZERO = bytes(32)


def wire_bytes(array: np.ndarray) -> bytes:
    """A tensor's bytes on the wire: little-endian, C order."""
    a = np.asarray(array)
    return np.ascontiguousarray(a, a.dtype.newbyteorder("<")).tobytes()


WORD = 32


def words(data: bytes) -> list[bytes]:
    """The bytes as 32-byte words, the last one zero-padded."""
    data = data + bytes(-len(data) % WORD)
    return [data[i:i + WORD] for i in range(0, len(data), WORD)]


def word_levels(data: bytes) -> list[list[bytes]]:
    """The Merkle levels of a tensor's words; [[ZERO]] for no bytes."""
    return merkle_levels(words(data) or [ZERO])


def word_root(data: bytes) -> bytes:
    """A tensor's leaf in the trace (RefereeMerkle.wordRoot on chain)."""
    return word_levels(data)[-1][0]


def leaf(array: np.ndarray) -> bytes:
    return word_root(wire_bytes(array))


def multiproof(levels: list[list[bytes]], indices: list[int]) -> list[bytes]:
    """The siblings that prove the leaves at the sorted distinct `indices` together, in the order
    RefereeMerkle.multiRoot consumes them: level by level from the leaves, left to right, each node
    whose sibling is not itself known."""
    known = sorted(set(indices))
    proof = []
    for h in range(len(levels) - 1):
        parents, i = [], 0
        while i < len(known):
            idx = known[i]
            if idx & 1 == 0 and i + 1 < len(known) and known[i + 1] == idx + 1:
                i += 2
            else:
                proof.append(levels[h][idx ^ 1])
                i += 1
            parents.append(idx >> 1)
        known = parents
    return proof


def multi_root(indices: list[int], leaves: list[bytes], proof: list[bytes], depth: int) -> bytes:
    """The root that `leaves` at sorted distinct `indices` and `proof` give (multiproof's inverse)."""
    nodes, p = list(zip(indices, leaves)), 0
    for _ in range(depth):
        parents, i = [], 0
        while i < len(nodes):
            idx, h = nodes[i]
            if idx & 1 == 0 and i + 1 < len(nodes) and nodes[i + 1][0] == idx + 1:
                parents.append((idx >> 1, keccak(h + nodes[i + 1][1])))
                i += 2
                continue
            sib, p = proof[p], p + 1
            parents.append((idx >> 1, keccak(h + sib) if idx & 1 == 0 else keccak(sib + h)))
            i += 1
        nodes = parents
    if len(nodes) != 1 or nodes[0][0] != 0 or p != len(proof):
        raise ValueError("the multiproof does not fit its indices")
    return nodes[0][1]


def tensor_names(model: cvm.Model) -> list[str]:
    """The trace's tensors in leaf order: the graph inputs, then each node's output."""
    return [i.name for i in model.graph.inputs] + [n.output for n in model.graph.nodes]


def depth_for(count: int) -> int:
    return max(0, (count - 1).bit_length())


def merkle_levels(leaves: list[bytes]) -> list[list[bytes]]:
    """levels[0] = the leaves padded to a power of two, levels[-1] = [root]."""
    level = list(leaves) + [ZERO] * ((1 << depth_for(len(leaves))) - len(leaves))
    levels = [level]
    while len(level) > 1:
        level = [keccak(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
        levels.append(level)
    return levels


def merkle_proof(levels: list[list[bytes]], index: int) -> list[bytes]:
    """Siblings from the leaf up (DisputeGame.verify's order)."""
    return [levels[h][(index >> h) ^ 1] for h in range(len(levels) - 1)]


def verify_proof(root: bytes, leaf_hash: bytes, index: int, proof: list[bytes]) -> bool:
    h = leaf_hash
    for i, sibling in enumerate(proof):
        h = keccak(h + sibling) if (index >> i) & 1 == 0 else keccak(sibling + h)
    return h == root


@dataclass
class Trace:
    """One sample's run, kept whole: every tensor, its leaf, and the tree over them."""
    model: cvm.Model
    tensors: list[np.ndarray]  # storage dtype, batch of 1
    levels: list[list[bytes]]

    @property
    def leaves(self) -> list[bytes]:
        return self.levels[0][:len(self.tensors)]

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    @property
    def depth(self) -> int:
        return len(self.levels) - 1

    @property
    def output(self) -> np.ndarray:
        return self.tensors[output_leaf(self.model)]

    def children(self, level: int, index: int) -> tuple[bytes, bytes]:
        """The two children of the subtree root `index` at height `level` (leaves are height 0)."""
        below = self.levels[level - 1]
        return below[2 * index], below[2 * index + 1]

    def tensor_levels(self, index: int) -> list[list[bytes]]:
        """The word tree of leaf `index`'s tensor (its root is the leaf)."""
        return word_levels(wire_bytes(self.tensors[index]))

    @property
    def input_bytes(self) -> bytes:
        """The request's input of this sample: every graph input's wire bytes in model input order,
        concatenated (spec section 11)."""
        return b"".join(wire_bytes(t) for t in self.tensors[:len(self.model.graph.inputs)])

    def step_inputs(self, index: int) -> tuple[bytes, list[list[bytes]]]:
        """What DisputeGame.resolveStep takes for leaf `index`: the node's input tensors back to back
        and a Merkle proof for each; for an input leaf, the request's whole input and no proofs (the
        game checks its keccak256 and takes the leaf's slice)."""
        if index < len(self.model.graph.inputs):
            return self.input_bytes, []
        producers = node_inputs(self.model, index)
        data = b"".join(wire_bytes(self.tensors[p]) for p in producers)
        return data, [merkle_proof(self.levels, p) for p in producers]


def run_trace(model: cvm.Model, x) -> Trace:
    """Runs one sample (an array, or a dict by input name: what Model.decode_input gives) with the
    reference interpreter, keeping every tensor."""
    inputs, batch = model._normalize_inputs(x)
    if batch != 1:
        raise ValueError(f"a trace is of one sample, got a batch of {batch}")
    values = reference.run(model.graph, model.analysis, inputs, keep_all=True)
    tensors = [values[name] for name in tensor_names(model)]
    return Trace(model, tensors, merkle_levels([leaf(t) for t in tensors]))


def output_leaf(model: cvm.Model) -> int:
    if len(model.graph.outputs) != 1:
        raise ValueError("traces are defined for models with one output")
    return tensor_names(model).index(model.graph.outputs[0])


def node_inputs(model: cvm.Model, index: int) -> list[int]:
    """Leaf indices of the distinct non-constant inputs of the node that makes leaf `index`."""
    names = tensor_names(model)
    first = len(model.graph.inputs)
    if not first <= index < len(names):
        raise ValueError(f"leaf {index} is not made by a node (leaves {first}..{len(names) - 1} are)")
    node = model.graph.nodes[index - first]
    position = {name: i for i, name in enumerate(names[:index])}
    return [position[n] for n in dict.fromkeys(node.inputs) if n not in model.graph.constants]


def step(model: cvm.Model, index: int, data: bytes) -> tuple[bytes, list[int], list[bytes]]:
    """Re-executes the node making leaf `index` on its input tensors given as wire bytes back to
    back: (its output's leaf, the producing leaf of each input, each input's leaf). Raises
    ValueError when the bytes do not fit the inputs' shapes or a value is outside its proven range."""
    producers = node_inputs(model, index)
    names = tensor_names(model)
    node = model.graph.nodes[index - len(model.graph.inputs)]
    env, offset = {}, 0
    for p in producers:
        info = model.analysis.tensors[names[p]]
        dtype = np.dtype(storage_dtype(info.bits)).newbyteorder("<")
        size = int(np.prod(info.shape, dtype=np.int64)) * dtype.itemsize
        if offset + size > len(data):
            raise ValueError(f"step input {names[p]!r} needs {size} bytes, {len(data) - offset} left")
        value = np.frombuffer(data, dtype, size // dtype.itemsize, offset).reshape((1, *info.shape))
        if value.size and (value.min() < info.lo or value.max() > info.hi):
            raise ValueError(f"step input {names[p]!r} is outside its proven range")
        env[names[p]] = value.astype(np.int64)
        offset += size
    if offset != len(data):
        raise ValueError(f"step inputs have {len(data) - offset} bytes too many")
    attrs = model.analysis.attrs[index - len(model.graph.inputs)]
    wide = {n: env[n] if n in env else model.graph.constants[n].astype(np.int64) for n in dict.fromkeys(node.inputs)}
    out = OPSETS[model.graph.opset][node.op].reference(*(wide[n] for n in node.inputs), **attrs)
    info = model.analysis.tensors[node.output]
    out = out.astype(storage_dtype(info.bits))
    return leaf(out), producers, [leaf(env[names[p]].astype(storage_dtype(model.analysis.tensors[names[p]].bits)))
                                   for p in producers]


def step_gas(model: cvm.Model, index: int) -> int:
    """The node's own static cost (Analysis.node_costs); the precompile adds its call and byte charges."""
    return int(model.analysis.node_costs[index - len(model.graph.inputs)])
