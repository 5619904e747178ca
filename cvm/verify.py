"""Load-time checks of an untrusted graph: structure, shapes, bits, int32/int64 safety, limits (those of the
graph's opset, cvm.limits.LIMITS), cost.

Every failure is a VerifyError naming the node and the rule (docs/spec.md, "Verification").
Nothing here allocates anything larger than the constants already in the file.
"""
from __future__ import annotations

import re
from math import prod
from dataclasses import dataclass

import numpy as np

from . import limits
from .errors import LimitError, VerifyError
from .ir import Graph
from .ops import OPSETS, SCHEDULES, Arg, RuleError
from .ops.base import ConstStats
from .ops.base import elements
from .arith import bits_for, bits_max
from .values import DTYPE_NAMES, storage_dtype

NAME_RE = re.compile(r"[A-Za-z0-9_.:/\-]+")
SMALL_CONSTANT = 64  # elements up to which a constant's min and max are taken from a Python list


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[int, ...]  # per sample for activations; full shape for constants
    lo: int
    hi: int
    bits: int
    kind: str  # "input", "const" or "activation"


@dataclass(frozen=True)
class Analysis:
    """What verification proved: every tensor's shape and interval, each node's cost."""

    tensors: dict[str, TensorInfo]
    attrs: list[dict]  # resolved attributes of each node, defaults filled in
    node_costs: list[int]
    gas: int  # per sample
    activation_bytes: int  # per sample, all activations (an upper bound on memory)
    max_accumulator_bits: int


def _check_name(name, what: str) -> None:
    if not isinstance(name, str) or not 1 <= len(name) <= limits.MAX_NAME_LENGTH or not NAME_RE.fullmatch(name):
        raise VerifyError("structure.name", f"{what} name {name!r} must be 1..{limits.MAX_NAME_LENGTH} "
                                            "characters of [A-Za-z0-9_.:/-]")


def _check_shape(shape, what: str, max_elements: int, node: str | None = None) -> None:
    if len(shape) <= limits.MAX_RANK and (not shape or (min(shape) >= 1 and max(shape) <= limits.MAX_DIM)) \
            and prod(shape) <= max_elements:
        return  # (the common case, in C: a file may hold 10^5 constants)
    if len(shape) > limits.MAX_RANK:
        raise LimitError("limits.rank", f"{what} has rank {len(shape)} > {limits.MAX_RANK}", node)
    if any(d < 1 for d in shape):
        raise VerifyError("shape.empty", f"{what} has a dimension < 1: {list(shape)}", node)
    if any(d > limits.MAX_DIM for d in shape):
        raise LimitError("limits.dim", f"{what} has a dimension > {limits.MAX_DIM}: {list(shape)}", node)
    if elements(shape) > max_elements:
        raise LimitError("limits.elements", f"{what} has {elements(shape)} elements > {max_elements}", node)


def _check_bits(lo: int, hi: int, node: str) -> int:
    bits = bits_for(lo, hi)
    if bits > limits.MAX_BITS:
        raise VerifyError("bits.overflow", f"values may reach [{lo}, {hi}], which needs {bits} bits "
                                           f"> {limits.MAX_BITS} (int32)", node)
    return bits


class Verifier:
    """The checks of `verify`, one tensor at a time, for tools that grow a graph and need the bounds
    of each new tensor as they go (MRT's quantizer): linear in the graph's size, not quadratic.
    Inputs and constants must be added before the first node that reads them."""

    def __init__(self, opset: int):
        self.ops = OPSETS.get(opset)
        if self.ops is None:
            raise VerifyError("structure.opset", f"unknown opset {opset}; known: {sorted(OPSETS)}")
        self.opset = opset
        self.node_gas = SCHEDULES[opset].node  # the per-node charge of the opset's gas schedule
        self.edge_gas = SCHEDULES[opset].edge  # and per input a node lists (schedule v3: opset 4)
        self.limits = limits.of(opset)
        self.tensors: dict[str, TensorInfo] = {}
        self.constants: dict[str, ConstStats] = {}
        self.attrs: list[dict] = []
        self.costs: list[int] = []
        self.const_elements = self.act_bytes = self.acc_bits = self.largest_constant = self.largest_tensor = 0

    def _define(self, name: str, info: TensorInfo, what: str) -> TensorInfo:
        _check_name(name, what)
        if name in self.tensors:
            raise VerifyError("structure.unique", f"name {name!r} is defined twice")
        self.tensors[name] = info
        return info

    def add_input(self, inp) -> TensorInfo:
        _check_shape(inp.shape, f"input {inp.name!r}", self.limits.tensor_elements)
        self.largest_tensor = max(self.largest_tensor, elements(inp.shape))
        if not 1 <= inp.bits <= limits.MAX_BITS:
            raise VerifyError("structure.bits", f"input {inp.name!r} has bits {inp.bits}, not in 1..{limits.MAX_BITS}")
        m = bits_max(inp.bits)
        return self._define(inp.name, TensorInfo(tuple(inp.shape), -m, m, inp.bits, "input"), "input")

    def add_constant(self, name: str, values: np.ndarray) -> TensorInfo:
        if values.dtype not in DTYPE_NAMES.values():
            raise VerifyError("structure.dtype", f"constant {name!r} has dtype {values.dtype}; allowed: {sorted(DTYPE_NAMES)}")
        _check_shape(values.shape, f"constant {name!r}", self.limits.constant_elements)
        self.const_elements += values.size
        self.largest_constant = max(self.largest_constant, int(values.size))
        small = values.size <= SMALL_CONSTANT and values.ravel().tolist()  # min/max of a list: 10x faster
        lo, hi = (min(small), max(small)) if small else (int(values.min()), int(values.max()))
        info = self._define(name, TensorInfo(tuple(values.shape), lo, hi, bits_for(lo, hi), "const"), "constant")
        self.constants[name] = ConstStats(values)
        return info

    def check_constants(self) -> None:
        if self.const_elements > self.limits.total_constant_elements:
            raise LimitError("limits.constants",
                             f"constants hold {self.const_elements} elements > {self.limits.total_constant_elements}")

    def add_node(self, node) -> TensorInfo:
        where = node.output
        if len(self.attrs) >= self.limits.nodes:
            raise LimitError("limits.nodes", f"more than {self.limits.nodes} nodes")
        self.check_node_inputs(node)
        opdef = self.ops.get(node.op)
        if opdef is None:
            raise VerifyError("node.op", f"unknown op {node.op!r} (opset {self.opset})", where)
        n_in = len(node.inputs)
        if n_in < opdef.min_inputs or (opdef.max_inputs >= 0 and n_in > opdef.max_inputs):
            raise VerifyError("node.arity", f"{node.op} takes {opdef.min_inputs}..{opdef.max_inputs if opdef.max_inputs >= 0 else 'n'} "
                                            f"inputs, got {n_in}", where)
        distinct = self._distinct_args(node, opdef)
        args = list(map(distinct.__getitem__, node.inputs))  # one Arg per distinct name, shared by its listings
        if all(a.is_const for a in distinct.values()):
            raise VerifyError("node.const_only", f"{node.op} has only constant inputs (fold it at conversion)", where)
        try:
            attrs = opdef.resolve_attrs(node.attrs)
            shape = opdef.shape(args, attrs)
            _check_shape(shape, "output", self.limits.tensor_elements, where)
            lo, hi = opdef.bound(args, attrs, shape)
            cost = self.node_gas + self.edge_gas * len(node.inputs) + opdef.cost(args, attrs, shape)
        except RuleError as e:
            raise VerifyError(e.rule, str(e), where) from None
        bits = _check_bits(lo, hi, where)
        if opdef.accumulates:
            self.acc_bits = max(self.acc_bits, bits)
        info = self._define(node.output, TensorInfo(shape, int(lo), int(hi), bits, "activation"), "node output")
        self.act_bytes += elements(shape) * storage_dtype(bits).itemsize
        self.largest_tensor = max(self.largest_tensor, elements(shape))
        self._check_memory(where)  # after every node: later nodes' work is never done for a model over the limit
        self.attrs.append(attrs)
        self.costs.append(cost)
        return info

    def check_node_inputs(self, node) -> None:
        """limits.node_inputs (opset 4 on): how many inputs one node may list."""
        cap = self.limits.node_inputs
        if cap is not None and len(node.inputs) > cap:
            raise LimitError("limits.node_inputs", f"{node.op} lists {len(node.inputs)} inputs > {cap}", node.output)

    def _distinct_args(self, node, opdef) -> dict[str, Arg]:
        """Each distinct input name's Arg, in order of first listing. A node of opsets 1-3 may list
        10^6 inputs: per listing only C-level work here (dict.fromkeys, list.index); the rules that
        depend on a position (structure.order, node.const_input, node.activation_input) are checked
        at the few positions where one can fail, in position order, so the first failing position
        raises, as a check of every listing in turn would."""
        args: dict[str, Arg] = {}
        undefined = None
        for name in dict.fromkeys(node.inputs):
            info = self.tensors.get(name)
            if info is None:
                undefined = name
                break
            stats = self.constants.get(name) if info.kind == "const" else None
            args[name] = Arg(info.shape, info.lo, info.hi, None if stats is None else stats.values, stats)
        n_in = len(node.inputs)
        positions = {p for p in (*opdef.const_inputs, *opdef.activation_inputs) if p < n_in}
        if undefined is not None:
            positions.add(node.inputs.index(undefined))  # its first listing: the first undefined one
        for pos in sorted(positions):
            self._check_input(node, opdef, pos, args.get(node.inputs[pos]))
        return args

    @staticmethod
    def _check_input(node, opdef, pos: int, arg: Arg | None) -> None:
        """The rules on input `pos` of a node (arg: None when its name is not defined yet)."""
        name, where = node.inputs[pos], node.output
        if arg is None:
            raise VerifyError("structure.order", f"input {name!r} is not defined before this node", where)
        if pos in opdef.const_inputs and arg.const is None:
            raise VerifyError("node.const_input", f"{node.op} input {pos} ({name!r}) must be a constant", where)
        if pos in opdef.activation_inputs and arg.const is not None:
            raise VerifyError("node.activation_input", f"{node.op} input {pos} ({name!r}) must not be a constant", where)

    def _check_memory(self, where: str) -> None:
        if self.act_bytes > self.limits.activation_bytes:
            raise LimitError("limits.memory", f"activations need {self.act_bytes} bytes per sample > "
                                              f"{self.limits.activation_bytes}", where)

    def footprint(self) -> limits.Footprint:
        """The size of what was admitted so far (for the lowest opset whose limits admit it)."""
        return limits.Footprint(len(self.attrs), self.largest_tensor, self.largest_constant, self.const_elements,
                                self.act_bytes)

    def finish(self, outputs: list[str]) -> Analysis:
        self.check_constants()
        if not outputs:
            raise VerifyError("structure.outputs", "the model has no outputs")
        if len(set(outputs)) != len(outputs):
            raise VerifyError("structure.outputs", "an output is listed twice")
        for name in outputs:
            if name not in self.tensors or self.tensors[name].kind != "activation":
                raise VerifyError("structure.outputs", f"output {name!r} is not the output of a node")
        return Analysis(dict(self.tensors), list(self.attrs), list(self.costs), sum(self.costs), self.act_bytes,
                        self.acc_bits)


def verify(graph: Graph) -> Analysis:
    """Check every rule of the spec; return the proven facts, or raise VerifyError."""
    v = Verifier(graph.opset)
    if len(graph.nodes) > v.limits.nodes:  # before any work
        raise LimitError("limits.nodes", f"{len(graph.nodes)} nodes > {v.limits.nodes}")
    if v.limits.node_inputs is not None:  # before any work too: one length per node
        for node in graph.nodes:
            v.check_node_inputs(node)
    if not graph.inputs:
        raise VerifyError("structure.inputs", "the model has no inputs")
    if not graph.outputs:
        raise VerifyError("structure.outputs", "the model has no outputs")
    for inp in graph.inputs:
        v.add_input(inp)
    for name, values in graph.constants.items():
        v.add_constant(name, values)
    v.check_constants()
    for node in graph.nodes:
        v.add_node(node)
    return v.finish(graph.outputs)
