"""The referee commitment of a model: what the Solidity referee needs to recompute one output
element of one node, Merkle-structured so each piece is proven on its own.

For each node, a spec (NodeSpec in contracts/src/Referee.sol): the op's code, its integer
parameters (shapes and attributes, laid out per op below), and for each input position either the
trace leaf of the activation that feeds it or the word root of the constant (the same word tree as
a trace leaf, cvm/chain/trace.py), with each input's element bytes and element count, and the
output's. A spec's leaf is keccak256(abi.encode(spec)). The commitment's root is the Merkle tree
over the specs placed at their node's trace leaf index (the graph input's position holds a zero
leaf), as deep as the trace tree. With it the registry stores the trace's leaf count, its output
leaf, and the msgpack prefix of the output commitment (spec section 10: for one sample the output
hash is keccak256(prefix ++ output bytes)).

The commitment is computed from the model, so it adds nothing to the .cvm format or the model hash:
the author publishes it once (ModelRegistry.commitReferee) and every operator can recompute and
check it (`check_published`) before it serves the model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from eth_abi import encode
from eth_hash.auto import keccak

import cvm
from cvm.chain import trace
from cvm.commit import encode_outputs
from cvm.values import storage_dtype

# Referee.sol's op codes. reshape and flatten keep the row-major elements: one code.
OPS = {"conv2d": 1, "dense": 2, "add": 3, "sub": 4, "mul": 5, "div": 6, "relu": 7, "clip": 8,
       "requant": 9, "lut": 10, "max_pool2d": 11, "reshape": 12, "flatten": 12}
ACTIVATION_NONE = 2**256 - 1  # NodeSpec.act of a constant input
SPEC_TYPE = "(uint256,int256[],uint256[],bytes32[],uint256[],uint256[],uint256,uint256)"


class NotRefereed(ValueError):
    """A node whose op the Solidity referee does not recompute."""


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


def _params(model: cvm.Model, node, attrs: dict) -> tuple[int, ...]:
    out = tuple(model.analysis.tensors[node.output].shape)
    xs = _shape(model, node.inputs[0])
    if node.op == "conv2d":
        w = _shape(model, node.inputs[1])
        return (*xs, *out, w[2], w[3], *attrs["strides"], *attrs["pads"][:2], *attrs["dilations"], attrs["groups"])
    if node.op == "max_pool2d":
        return (*xs, out[1], out[2], *attrs["kernel"], *attrs["strides"], *attrs["pads"][:2], *attrs["dilations"])
    if node.op == "dense":
        return (xs[-1], out[-1])
    if node.op in ("add", "sub", "mul", "div"):
        r = len(out)
        pad = [(1,) * (r - len(s)) + s for s in (_shape(model, n) for n in node.inputs)]
        return (r, *out, *pad[0], *pad[1])
    if node.op == "clip":
        return (attrs["lo"], attrs["hi"])
    if node.op == "requant":
        m = _shape(model, node.inputs[1])[0]
        stride = int(np.prod(xs[attrs["axis"] + 1:], dtype=np.int64)) if m != 1 else 1
        return (attrs["shift"], attrs["bits"], m, stride, xs[attrs["axis"]] if m != 1 else 1)
    if node.op == "lut":
        return (attrs["offset"],)
    return ()


def node_spec(model: cvm.Model, leaf_index: int) -> NodeSpec:
    """The spec of the node that makes trace leaf `leaf_index`."""
    first = len(model.graph.inputs)
    k = leaf_index - first
    if not 0 <= k < len(model.graph.nodes):
        raise ValueError(f"leaf {leaf_index} is not made by a node")
    node, attrs = model.graph.nodes[k], model.analysis.attrs[k]
    if node.op not in OPS:
        raise NotRefereed(f"node {k} ({node.op}) has no Solidity referee")
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
    return NodeSpec(OPS[node.op], tuple(int(v) for v in _params(model, node, attrs)), tuple(act), tuple(root),
                    tuple(size), tuple(numel), _itemsize(out.bits), int(np.prod(out.shape, dtype=np.int64)))


def output_prefix(model: cvm.Model) -> bytes:
    """The bytes of encode_outputs in front of one sample's output data (spec section 10)."""
    info = model.analysis.tensors[model.graph.outputs[0]]
    zero = np.zeros((1, *info.shape), storage_dtype(info.bits))
    data = trace.wire_bytes(zero)
    encoded = encode_outputs(zero)
    if not encoded.endswith(data):
        raise ValueError("the output encoding does not end with the output's bytes")
    return encoded[:len(encoded) - len(data)]


def commit(model: cvm.Model) -> Commitment:
    """The referee commitment of a model with one input and one output. Nodes whose op has no
    referee get a zero leaf: a dispute that reaches one of them cannot be refereed."""
    if len(model.graph.inputs) != 1:
        raise ValueError("the referee is defined for models with one input")
    names = trace.tensor_names(model)
    specs = {}
    for i in range(1, len(names)):
        try:
            specs[i] = node_spec(model, i)
        except NotRefereed:
            continue
    leaves = [specs[i].leaf() if i in specs else bytes(32) for i in range(len(names))]
    return Commitment(specs, trace.merkle_levels(leaves), len(names), trace.output_leaf(model), output_prefix(model))


def publish(w3, registry, author, model: cvm.Model, **kw):
    """The author's ModelRegistry.commitReferee for a registered model."""
    from cvm.chain.contracts import send
    c = commit(model)
    return send(w3, author, registry.functions.commitReferee(model.hash, c.as_tuple()), **kw)


def check_published(registry, model: cvm.Model) -> bool:
    """Whether the registry holds this model's commitment as recomputed here (an operator's check:
    a wrong commitment would make the referee judge honest operators wrong)."""
    on_chain = registry.functions.refereeCommitment(model.hash).call()
    return tuple(on_chain) == commit(model).as_tuple()
