"""The float graph IR: a flat, topologically ordered list of nodes over named tensors.

Conventions every pass and the quantizer rely on:

* Axis 0 of every graph input, and of every tensor computed from one ("batched" tensors), is the
  batch axis. Shapes in `Graph.inputs` and `Graph.shapes` are PER SAMPLE (batch axis left out);
  attributes that name axes count the batch axis as 0 (as ONNX does). No node may reduce,
  transpose, reshape, pad, concatenate or broadcast along the batch axis: the shape rules reject
  it, so a graph gives the same per-sample result at any batch size.
* Constants (`Graph.initializers`) have no batch axis: their full shape is their array shape.
  In binary ops they broadcast numpy-style against the full batched tensor and so never have a
  dimension > 1 where the batch axis lines up.
* Ops and their attributes are MRT's own (see `mrt.float_ops`), not ONNX's; each node has
  exactly the attributes its op declares and one output.

A Graph checks itself when built (unknown op or attribute, arity, order, shapes) and is treated
as immutable: passes build new graphs (`Graph.replace`) instead of editing one.
"""
import dataclasses
import heapq
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

import cvm.limits

from mrt.errors import GraphError
from mrt.float_ops import BATCH, OPS, is_batched
from mrt.float_ops.shapes import check_batched_result

CONST_DTYPES = (np.dtype(np.float32), np.dtype(np.int64))


def _freeze(value):
    """Attribute values as plain immutable Python values (tuples, ints, floats, str)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


@dataclass(frozen=True)
class Node:
    """One op application: `outputs = op(*inputs, **attrs)`; `name` is for messages only."""

    op: str
    inputs: tuple
    outputs: tuple
    attrs: dict = field(default_factory=dict)
    name: str = ""

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", {k: _freeze(v) for k, v in self.attrs.items()})

    def __str__(self):
        attrs = ", ".join(f"{k}={v}" for k, v in sorted(self.attrs.items()))
        text = f"{', '.join(self.outputs)} = {self.op}({', '.join(self.inputs)})"
        return text + (f" {{{attrs}}}" if attrs else "") + (f"  # {self.name}" if self.name else "")


@dataclass(frozen=True)
class TensorSpec:
    """A graph input: its name, per-sample shape (no batch axis) and dtype ("float32", or "int64" for
    integer inputs such as token ids, computed on as exact float32 values by the float run)."""

    name: str
    shape: tuple
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))


@dataclass(frozen=True, eq=False)
class Graph:
    """inputs, outputs, constants and nodes; `shapes` (per-sample shape of every batched tensor)
    is computed from the op table's shape rules when the graph is built."""

    inputs: tuple
    outputs: tuple
    initializers: dict
    nodes: tuple
    name: str = "graph"
    # the unit axis of graph inputs/outputs where it is not ONNX axis 0: the one-sample ONNX axis of size 1 the
    # CVM batch axis stands for, None where there is none (stored whole) (mrt.onnx_import.one_sample)
    batch_axes: dict = field(default_factory=dict)
    # graph outputs ONNX declares integer or boolean (an index, a label, a comparison): the integer model gives
    # them at scale 1, rounded to the integer they stand for (mrt.quantize)
    integer_outputs: frozenset = field(default_factory=frozenset, compare=False)
    # tensors computed inside an unrolled recurrence (mrt.onnx_import.ops_rnn) and the sequences it reads:
    # their error compounds over the steps, so the cvm target keeps them wide (mrt.recurrent_precision)
    recurrent: frozenset = field(default_factory=frozenset, compare=False)
    shapes: dict = field(init=False, repr=False, compare=False)
    _full: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "initializers", dict(self.initializers))
        self._check_names()
        full = infer_full_shapes(self.inputs, self.initializers, self.nodes)
        object.__setattr__(self, "_full", full)
        object.__setattr__(self, "shapes", {k: s[1:] for k, s in full.items() if is_batched(s)})

    def unit_axis(self, name):
        """The ONNX axis of one sample's input/output `name` that the CVM batch axis stands for (None: a new
        axis in front); mrt.onnx_import.one_sample.as_batch / as_sample convert."""
        return self.batch_axes.get(name, 0)

    def _check_names(self):
        defined = set()
        for spec in self.inputs:
            if spec.dtype not in ("float32", "int64") or not all(d >= 1 for d in spec.shape):
                raise GraphError(f"input {spec.name!r}: need float32 or int64 and dims >= 1, got "
                                 f"{spec.dtype} {spec.shape}")
            _define(defined, spec.name, "input")
        for name, value in self.initializers.items():
            if not isinstance(value, np.ndarray) or value.dtype not in CONST_DTYPES:
                raise GraphError(f"constant {name!r}: need a float32 or int64 numpy array, got "
                                 f"{getattr(value, 'dtype', type(value))}")
            _define(defined, name, "constant")
        for node in self.nodes:
            for i in node.inputs:
                if i not in defined:
                    raise GraphError(f"node {node.name!r} ({node.op}) reads {i!r} before it is "
                                     "defined: nodes must be topologically ordered (toposort())")
            for o in node.outputs:
                _define(defined, o, f"output of node {node.name!r}")
        for o in self.outputs:
            if o not in defined:
                raise GraphError(f"graph output {o!r} is not defined")

    # -- queries ---------------------------------------------------------------------------

    def producer(self, name):
        """The node that computes `name`, or None for inputs and constants."""
        return self._producers.get(name)

    def consumers(self, name):
        """The nodes that read `name`, in graph order."""
        return list(self._consumers.get(name, ()))

    def position(self, name):
        """The place in `nodes` of the node that computes `name` (graph order without a scan)."""
        return self._positions[name]

    @cached_property
    def _positions(self):
        return {o: k for k, n in enumerate(self.nodes) for o in n.outputs}

    @cached_property
    def _producers(self):
        """{tensor: node}, built once: passes ask for producers per node, and a scan each time made
        them quadratic in the nodes (a 2k-node chain took minutes to convert)."""
        return {o: n for n in self.nodes for o in n.outputs}

    @cached_property
    def _consumers(self):
        """{tensor: [reading nodes in graph order]}, built once (as _producers); a node reading a tensor
        twice is listed once, as the scan listed it."""
        out = {}
        for n in self.nodes:
            for i in dict.fromkeys(n.inputs):
                out.setdefault(i, []).append(n)
        return out

    def is_constant(self, name):
        return name in self.initializers

    def tensor_names(self):
        """Every tensor name defined in the graph (inputs, constants, node outputs)."""
        return set(self._full)

    def full_shape(self, name):
        """Shape including the batch axis (`BATCH` at 0 for batched tensors)."""
        return self._full[name]

    # -- building ------------------------------------------------------------------------

    def fresh_name(self, hint):
        """A tensor/constant name not used in this graph, derived from `hint`."""
        return fresh_name(hint, self._full)

    def replace(self, **changes):
        """A new, re-checked graph with some fields replaced (the passes' way to edit)."""
        return dataclasses.replace(self, **changes)

    def copy(self):
        """A deep copy: constants and attributes are not shared with this graph."""
        return self.replace(
            initializers={k: v.copy() for k, v in self.initializers.items()},
            nodes=[dataclasses.replace(n, attrs=dict(n.attrs)) for n in self.nodes])

    def __str__(self):
        lines = [f"graph {self.name}"]
        lines += [f"  input {s.name}: {s.dtype}{list(s.shape)}" for s in self.inputs]
        lines += [f"  const {k}: {v.dtype}{list(v.shape)}" for k, v in self.initializers.items()]
        for n in self.nodes:
            shape = self._full[n.outputs[0]]
            shown = list(shape[1:]) if is_batched(shape) else f"const{list(shape)}"
            lines.append(f"  {n}  -> {shown}")
        lines.append(f"  output {', '.join(self.outputs)}")
        return "\n".join(lines)


def _define(defined, name, what):
    if not name or name in defined:
        raise GraphError(f"{what} {name!r}: tensor names must be non-empty and defined once")
    defined.add(name)


def fresh_name(hint, taken):
    """`hint` if free in `taken`, else `hint_1`, `hint_2`, ..."""
    name, k = hint, 0
    while name in taken:
        k += 1
        name = f"{hint}_{k}"
    return name


def infer_node_shape(node, in_shapes):
    """Full output shape of one node from its inputs' full shapes, via the op table. Raises
    GraphError naming the node for an unknown op or attribute, bad arity or bad shapes."""
    where = f"node {node.name!r} ({node.op})"
    opdef = OPS.get(node.op)
    if opdef is None:
        raise GraphError(f"{where}: unknown op {node.op!r}")
    if set(node.attrs) != set(opdef.attrs):
        raise GraphError(f"{where}: attributes {sorted(node.attrs)} but the op takes exactly "
                         f"{sorted(opdef.attrs)}")
    lo, hi = opdef.arity
    if not lo <= len(node.inputs) <= hi or len(node.outputs) != 1:
        raise GraphError(f"{where}: takes {lo}..{hi} inputs and 1 output, got "
                         f"{len(node.inputs)} and {len(node.outputs)}")
    try:
        out = tuple(opdef.shape(*in_shapes, **node.attrs))
        if any(is_batched(s) for s in in_shapes):
            check_batched_result(out, node.op)
    except GraphError as e:
        raise GraphError(f"{where}: {e}") from None
    except (TypeError, ValueError, IndexError) as e:  # e.g. arithmetic on the batch axis
        raise GraphError(f"{where}: bad attributes or shapes {in_shapes}: {e}") from None
    elements = math.prod(d for d in out if d is not BATCH)
    if elements > cvm.limits.NEWEST.tensor_elements:  # refused before calibration tries to allocate it
        raise GraphError(f"{where}: output shape {_shape_text(out)} has {elements} elements per sample "
                         f"> CVM's limit {cvm.limits.NEWEST.tensor_elements} [limits.elements]")
    return out


def _shape_text(shape) -> str:
    return "(" + ", ".join("N" if d is BATCH else str(d) for d in shape) + ")"


def infer_full_shapes(inputs, initializers, nodes):
    """Full shapes of every tensor: (BATCH, *per_sample) for batched ones, array shapes for
    constants and for outputs of nodes that read only constants."""
    full = {s.name: (BATCH, *s.shape) for s in inputs}
    full.update({k: tuple(v.shape) for k, v in initializers.items()})
    for node in nodes:
        full[node.outputs[0]] = infer_node_shape(node, [full[i] for i in node.inputs])
    return full


def toposort(nodes, available):
    """Nodes reordered so each comes after the producers of its inputs (stable: keeps the given
    order where it is already valid). `available`: names defined before any node.

    Each step takes the earliest node (in the given order) whose inputs are all defined: a heap of
    the ready nodes' positions, and per node the count of inputs still missing, so the sort is
    O((nodes + edges) log nodes). Every pass sorts its result, so a sort that rescanned the pending
    nodes per step made the passes cubic in the nodes."""
    nodes = list(nodes)
    ready = set(available)
    missing, waiting = [], {}  # per node: how many distinct inputs are undefined; tensor -> waiting nodes
    for k, n in enumerate(nodes):
        needed = {i for i in n.inputs if i not in ready}
        missing.append(len(needed))
        for i in needed:
            waiting.setdefault(i, []).append(k)
    heap = [k for k, m in enumerate(missing) if m == 0]
    out = []
    while heap:
        k = heapq.heappop(heap)
        out.append(nodes[k])
        for o in nodes[k].outputs:
            if o in ready:
                continue
            ready.add(o)
            for j in waiting.pop(o, ()):
                missing[j] -= 1
                if missing[j] == 0:
                    heapq.heappush(heap, j)
    if len(out) < len(nodes):
        placed = {id(n) for n in out}
        raise GraphError(f"nodes {[n.name for n in nodes if id(n) not in placed]} have undefined or cyclic inputs")
    return tuple(out)
