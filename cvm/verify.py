"""Load-time checks of an untrusted graph: structure, shapes, bits, int32/int64 safety, limits, cost.

Every failure is a VerifyError naming the node and the rule (docs/spec.md, "Verification").
Nothing here allocates anything larger than the constants already in the file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from . import gas, limits
from .errors import LimitError, VerifyError
from .ir import Graph
from .ops import OPSETS, Arg, RuleError
from .ops.base import elements
from .values import DTYPE_NAMES, bits_for, bits_max, storage_dtype

NAME_RE = re.compile(r"[A-Za-z0-9_.:/\-]+")
MAC_OPS = ("conv2d", "dense", "matmul")


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


def _check_shape(shape, what: str, node: str | None = None) -> None:
    if len(shape) > limits.MAX_RANK:
        raise LimitError("limits.rank", f"{what} has rank {len(shape)} > {limits.MAX_RANK}", node)
    if any(d < 1 for d in shape):
        raise VerifyError("shape.empty", f"{what} has a dimension < 1: {list(shape)}", node)
    if any(d > limits.MAX_DIM for d in shape):
        raise LimitError("limits.dim", f"{what} has a dimension > {limits.MAX_DIM}: {list(shape)}", node)
    if elements(shape) > limits.MAX_TENSOR_ELEMENTS:
        raise LimitError("limits.elements", f"{what} has {elements(shape)} elements > {limits.MAX_TENSOR_ELEMENTS}", node)


def _check_bits(lo: int, hi: int, node: str) -> int:
    bits = bits_for(lo, hi)
    if bits > limits.MAX_BITS:
        raise VerifyError("bits.overflow", f"values may reach [{lo}, {hi}], which needs {bits} bits "
                                           f"> {limits.MAX_BITS} (int32)", node)
    return bits


def verify(graph: Graph) -> Analysis:
    """Check every rule of the spec; return the proven facts, or raise VerifyError."""
    ops = OPSETS.get(graph.opset)
    if ops is None:
        raise VerifyError("structure.opset", f"unknown opset {graph.opset}; known: {sorted(OPSETS)}")
    if len(graph.nodes) > limits.MAX_NODES:
        raise LimitError("limits.nodes", f"{len(graph.nodes)} nodes > {limits.MAX_NODES}")
    if not graph.inputs:
        raise VerifyError("structure.inputs", "the model has no inputs")
    if not graph.outputs:
        raise VerifyError("structure.outputs", "the model has no outputs")

    tensors: dict[str, TensorInfo] = {}

    def define(name: str, info: TensorInfo, what: str) -> None:
        _check_name(name, what)
        if name in tensors:
            raise VerifyError("structure.unique", f"name {name!r} is defined twice")
        tensors[name] = info

    for inp in graph.inputs:
        _check_shape(inp.shape, f"input {inp.name!r}")
        if not 1 <= inp.bits <= limits.MAX_BITS:
            raise VerifyError("structure.bits", f"input {inp.name!r} has bits {inp.bits}, not in 1..{limits.MAX_BITS}")
        m = bits_max(inp.bits)
        define(inp.name, TensorInfo(tuple(inp.shape), -m, m, inp.bits, "input"), "input")

    const_elements = 0
    for name, values in graph.constants.items():
        if values.dtype not in DTYPE_NAMES.values():
            raise VerifyError("structure.dtype", f"constant {name!r} has dtype {values.dtype}; allowed: {sorted(DTYPE_NAMES)}")
        _check_shape(values.shape, f"constant {name!r}")
        const_elements += values.size
        lo, hi = int(values.min()), int(values.max())
        define(name, TensorInfo(tuple(values.shape), lo, hi, bits_for(lo, hi), "const"), "constant")
    if const_elements > limits.MAX_CONSTANT_ELEMENTS:
        raise LimitError("limits.constants", f"constants hold {const_elements} elements > {limits.MAX_CONSTANT_ELEMENTS}")

    resolved, costs, act_bytes, acc_bits = [], [], 0, 0
    for node in graph.nodes:
        where = node.output
        opdef = ops.get(node.op)
        if opdef is None:
            raise VerifyError("node.op", f"unknown op {node.op!r} (opset {graph.opset})", where)
        n_in = len(node.inputs)
        if n_in < opdef.min_inputs or (opdef.max_inputs >= 0 and n_in > opdef.max_inputs):
            raise VerifyError("node.arity", f"{node.op} takes {opdef.min_inputs}..{opdef.max_inputs if opdef.max_inputs >= 0 else 'n'} "
                                            f"inputs, got {n_in}", where)
        args = []
        for pos, name in enumerate(node.inputs):
            info = tensors.get(name)
            if info is None:
                raise VerifyError("structure.order", f"input {name!r} is not defined before this node", where)
            const = graph.constants.get(name) if info.kind == "const" else None
            if pos in opdef.const_inputs and const is None:
                raise VerifyError("node.const_input", f"{node.op} input {pos} ({name!r}) must be a constant", where)
            if pos in opdef.activation_inputs and const is not None:
                raise VerifyError("node.activation_input", f"{node.op} input {pos} ({name!r}) must not be a constant", where)
            args.append(Arg(info.shape, info.lo, info.hi, const))
        if all(a.is_const for a in args):
            raise VerifyError("node.const_only", f"{node.op} has only constant inputs (fold it at conversion)", where)
        try:
            attrs = opdef.resolve_attrs(node.attrs)
            shape = opdef.shape(args, attrs)
            _check_shape(shape, "output", where)
            lo, hi = opdef.bound(args, attrs, shape)
            cost = gas.GAS_PER_NODE + opdef.cost(args, attrs, shape)
        except RuleError as e:
            raise VerifyError(e.rule, str(e), where) from None
        bits = _check_bits(lo, hi, where)
        if node.op in MAC_OPS:
            acc_bits = max(acc_bits, bits)
        define(node.output, TensorInfo(shape, int(lo), int(hi), bits, "activation"), "node output")
        act_bytes += elements(shape) * storage_dtype(bits).itemsize
        resolved.append(attrs)
        costs.append(cost)

    if act_bytes > limits.MAX_ACTIVATION_BYTES:
        raise LimitError("limits.memory", f"activations need {act_bytes} bytes per sample > {limits.MAX_ACTIVATION_BYTES}")
    if len(set(graph.outputs)) != len(graph.outputs):
        raise VerifyError("structure.outputs", "an output is listed twice")
    for name in graph.outputs:
        if name not in tensors or tensors[name].kind != "activation":
            raise VerifyError("structure.outputs", f"output {name!r} is not the output of a node")
    return Analysis(tensors, resolved, costs, sum(costs), act_bytes, acc_bits)
