"""The referee commitment of a model: what the Solidity referee needs to recompute one output
element of one node, Merkle-structured so each piece is proven on its own.

For each node, a spec (NodeSpec in contracts/src/Referee.sol): the op's code, its integer
parameters (shapes and attributes, laid out per op below), and for each input position either the
trace leaf of the activation that feeds it or the word root of the constant (the same word tree as
a trace leaf, cvm/chain/trace.py), with each input's element bytes and element count, and the
output's. A spec's leaf is keccak256(abi.encode(spec)). The commitment's root is the Merkle tree
over the specs placed at their node's trace leaf index (the graph inputs' positions hold zero
leaves), as deep as the trace tree. With it the registry stores the trace's leaf count, its output
leaf, and the msgpack prefix of the output commitment (spec section 10: for one sample the output
hash is keccak256(prefix ++ output bytes)).

The commitment is computed from the model, so it adds nothing to the .cvm format or the model hash:
a listing's publisher sets it (ModelRegistry.commitReferee, with the honest side's worst-case dispute
gas, cvm/chain/dispute_cost.py; a change waits ModelRegistry.REFEREE_DELAY) and every operator
recomputes and checks it (cvm/chain/model_commitment.py: `require_served`) before it serves a request on that
listing.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from eth_abi import encode
from eth_hash.auto import keccak

import cvm
from cvm.chain import trace
from cvm.chain.referee_ops import REFEREE_OPS
from cvm.commit import encode_outputs
from cvm.values import storage_dtype

# Referee.sol's op code constants, each by the first op name that uses it (flatten shares reshape's,
# pad and slice transpose's: referee_ops.REFEREE_OPS has every op)
OPS: dict[str, int] = {}
for _name, _op in REFEREE_OPS.items():
    if _op.code not in OPS.values():
        OPS[_name] = _op.code
ACTIVATION_NONE = 2**256 - 1  # NodeSpec.act of a constant input
SPEC_TYPE = "(uint256,int256[],uint256[],bytes32[],uint256[],uint256[],uint256,uint256)"
MAX_DEPTH = 16  # DisputeGame.MAX_DEPTH: trace depth + the output's word rounds + 1 must fit its moves
WORD_LEVELS = 5  # DisputeGame.WORD_LEVELS: word-tree levels one round of bisectWords descends (32 nodes a move)
# The referee's gas budget for one output element: REFEREE_BASE_GAS + reads * RefOp.read_gas (1,700
# to 2,600 per read for the ops that read many, measured in docs/chain.md) at most MAX_REFEREE_GAS,
# which leaves resolveElement's own work (spec check, proofs, slashing) room in a 30M-gas block.
MAX_REFEREE_GAS = 24_000_000
REFEREE_BASE_GAS = 200_000
MAX_REFEREE_INPUTS = 256  # input positions of one node's spec (a concat may list 10^5): calldata and hashing


class NotRefereed(ValueError):
    """A model the Solidity referee cannot judge (an op it lacks, an element past its gas budget, a
    node past the dispute's moves): no commitment is made for it, so on a chain without the trace
    precompile no dispute about it can start (NoRefereeCommitment) and nodes do not serve it."""


class RefereeMismatch(cvm.CVMError):
    """The registry's referee commitment for a model is missing or is not the model's."""


@dataclass(frozen=True)
class NodeSpec:
    op: int
    params: tuple[int, ...]
    act: tuple[int, ...]
    root: tuple[bytes, ...]
    size: tuple[int, ...]
    numel: tuple[int, ...]
    out_size: int
    out_numel: int

    def as_tuple(self) -> tuple:
        return (self.op, list(self.params), list(self.act), list(self.root), list(self.size),
                list(self.numel), self.out_size, self.out_numel)

    def leaf(self) -> bytes:
        return keccak(encode([SPEC_TYPE], [self.as_tuple()]))


@dataclass
class Commitment:
    specs: dict[int, NodeSpec]  # by trace leaf index
    levels: list[list[bytes]]
    leaf_count: int
    output_leaf: int
    output_prefix: bytes

    @property
    def root(self) -> bytes:
        return self.levels[-1][0]

    def as_tuple(self) -> tuple:
        """ModelRegistry.RefereeCommitment"""
        return (self.root, self.leaf_count, self.output_leaf, self.output_prefix)

    def proof(self, leaf_index: int) -> list[bytes]:
        return trace.merkle_proof(self.levels, leaf_index)


def _itemsize(bits: int) -> int:
    return np.dtype(storage_dtype(bits)).itemsize


def _shape(model: cvm.Model, name: str) -> tuple[int, ...]:
    """Per-sample shape of an activation, full shape of a constant."""
    if name in model.graph.constants:
        return tuple(model.graph.constants[name].shape)
    return tuple(model.analysis.tensors[name].shape)


def node_spec(model: cvm.Model, leaf_index: int) -> NodeSpec:
    """The spec of the node that makes trace leaf `leaf_index`."""
    first = len(model.graph.inputs)
    k = leaf_index - first
    if not 0 <= k < len(model.graph.nodes):
        raise ValueError(f"leaf {leaf_index} is not made by a node")
    node, attrs = model.graph.nodes[k], model.analysis.attrs[k]
    if node.op not in REFEREE_OPS:
        raise NotRefereed(f"node {k} ({node.op}): the Solidity referee has no {node.op}")
    if len(node.inputs) > MAX_REFEREE_INPUTS:
        raise NotRefereed(f"node {k} ({node.op}) has {len(node.inputs)} inputs, more than the referee's "
                          f"{MAX_REFEREE_INPUTS}")
    names = trace.tensor_names(model)
    position = {name: i for i, name in enumerate(names[:leaf_index])}
    act, root, size, numel = [], [], [], []
    for name in node.inputs:
        if name in model.graph.constants:
            c = model.graph.constants[name]
            act.append(ACTIVATION_NONE)
            root.append(trace.word_root(trace.wire_bytes(c)))
            size.append(c.dtype.itemsize)
            numel.append(int(c.size))
        else:
            info = model.analysis.tensors[name]
            act.append(position[name])
            root.append(bytes(32))
            size.append(_itemsize(info.bits))
            numel.append(int(np.prod(info.shape, dtype=np.int64)))
    out = model.analysis.tensors[node.output]
    ref = REFEREE_OPS[node.op]
    params = ref.params([_shape(model, n) for n in node.inputs], tuple(out.shape), attrs)
    spec = NodeSpec(ref.code, tuple(int(v) for v in params), tuple(act), tuple(root),
                    tuple(size), tuple(numel), _itemsize(out.bits), int(np.prod(out.shape, dtype=np.int64)))
    reads = ref.max_reads(spec.params, len(spec.act))
    if REFEREE_BASE_GAS + reads * ref.read_gas > MAX_REFEREE_GAS:
        raise NotRefereed(f"node {k} ({node.op}): one output element reads {reads} elements, about "
                          f"{REFEREE_BASE_GAS + reads * ref.read_gas:,} gas, past the referee's {MAX_REFEREE_GAS:,}")
    return spec


def output_prefix(model: cvm.Model) -> bytes:
    """The bytes of encode_outputs in front of one sample's output data (spec section 10)."""
    info = model.analysis.tensors[model.graph.outputs[0]]
    zero = np.zeros((1, *info.shape), storage_dtype(info.bits))
    data = trace.wire_bytes(zero)
    encoded = encode_outputs(zero)
    if not encoded.endswith(data):
        raise ValueError("the output encoding does not end with the output's bytes")
    return encoded[:len(encoded) - len(data)]


def word_rounds(word_depth: int) -> int:
    """Rounds of DisputeGame.bisectWords down a word tree of `word_depth` levels."""
    return -(-word_depth // WORD_LEVELS)


def commit(model: cvm.Model) -> Commitment:
    """The referee commitment of a model with one output and one or more inputs (trace leaves 0..k-1,
    zero leaves here: DisputeGame.resolveStep computes them from the request's input). Raises
    NotRefereed, naming the first node, where the referee cannot judge some node: a dispute reaching
    it could only time out against both parties, so no commitment (and no dispute without the
    precompile) is better."""
    names = trace.tensor_names(model)
    first = len(model.graph.inputs)
    depth = trace.depth_for(len(names))
    specs = {}
    for i in range(first, len(names)):
        specs[i] = spec = node_spec(model, i)
        words = trace.depth_for(max(1, -(-spec.out_numel * spec.out_size // trace.WORD)))
        if depth + word_rounds(words) + 1 > MAX_DEPTH:
            raise NotRefereed(f"node {i - first} ({model.graph.nodes[i - first].op}): its output's {words}-level "
                              f"word tree ({word_rounds(words)} rounds) and the {depth}-level trace need more than "
                              f"the dispute's {MAX_DEPTH} moves")
    leaves = [specs[i].leaf() if i in specs else bytes(32) for i in range(len(names))]
    return Commitment(specs, trace.merkle_levels(leaves), len(names), trace.output_leaf(model), output_prefix(model))
