"""Lowering of CVM nodes to concrete-python tracer operations, one rule per op (a side table).

Every traced value is pinned to its proven interval (`pin`): the `PinBounds` graph processor then
widens concrete's measured bounds to those intervals before bit widths are assigned, so the
compiled circuit can hold every value the verifier proved possible, whatever the inputset reached.
Table lookups are built by running the op's own `reference` function over the input domain.
"""
from __future__ import annotations

import inspect
from copy import deepcopy
from dataclasses import dataclass

import numpy as np
from concrete import fhe
from concrete.fhe.representation import Operation

from ..ir import Graph
from ..ops import OPSETS, OpDef, by_opset, derive, repriced_keys
from ..ops.base import TABLE_MONOTONE
from ..arith import mac_bound
from ..verify import Analysis
from .fhe_clamp import ClampPlan, plan_clamp
from .fhe_lookup import FHEUnsupported, LookupPlan, int_bits, plan_lookup, rounded_pin

PIN = "cvm_interval"


def pin(t, lo: int, hi: int):
    """Record the proven interval of a traced value (read back by PinBounds)."""
    node = (t if t.last_version is None else t.last_version).computation
    node.properties[PIN] = (int(lo), int(hi))
    return t


class PinBounds(fhe.GraphProcessor):
    """Widen every encrypted value's measured bounds to its proven interval (before bit widths)."""

    def apply(self, graph):
        for node in graph.query_nodes(ordered=True):
            if node.operation == Operation.Constant or not node.output.is_encrypted:
                continue
            if PIN not in node.properties:
                raise FHEUnsupported("fhe.internal", f"traced value {node.label()} has no proven interval "
                                                     f"(a lowering rule forgot to pin it)", node.tag or None)
            lo, hi = node.properties[PIN]
            mlo, mhi = (int(b) for b in node.bounds)
            if mlo < lo or mhi > hi:
                raise FHEUnsupported("fhe.internal", f"the inputset reached [{mlo}, {mhi}] outside the proven "
                                                     f"interval [{lo}, {hi}] of {node.label()}", node.tag or None)
            node.bounds = (np.int64(lo), np.int64(hi))
            value = deepcopy(node.output)
            value.dtype.update_to_represent(np.array([lo, hi], np.int64))
            node.output = value
            if node.operation == Operation.Input:
                node.inputs[0] = value
            for succ in graph.graph.successors(node):
                for edge in graph.graph.get_edge_data(node, succ).values():
                    succ.inputs[edge["input_idx"]] = value


# ---------------------------------------------------------------- lookups


@dataclass(frozen=True)
class Lookup:
    """One lookup node: its op's reference function, constants and plan."""

    opdef: OpDef
    attrs: dict
    consts: tuple
    profile: tuple
    plan: LookupPlan

    def reference(self, x: np.ndarray) -> np.ndarray:
        return self.opdef.reference(x, *self.consts, **self.attrs)

    def on_domain(self, xs: np.ndarray) -> np.ndarray:
        """xs: 1-D domain values -> (n, profile elements) outputs."""
        x = np.broadcast_to(xs.reshape((-1,) + (1,) * len(self.profile)), (len(xs),) + self.profile)
        return self.reference(np.ascontiguousarray(x)).reshape(len(xs), -1)

    def table(self, v: np.ndarray) -> np.ndarray:
        """The function concrete tabulates: table input (one sample) -> op output."""
        x = self.plan.representative(v)
        return self.reference(x[None])[0].astype(np.int64)


def _check_bits(what: str, lo: int, hi: int, budget: int, where: str) -> None:
    if int_bits(lo, hi) > budget:
        raise FHEUnsupported("fhe.lookup_bits", f"{what} ({int_bits(lo, hi)} bits > budget {budget})", where)


def plan_node(graph: Graph, analysis: Analysis, index: int, budget: int):
    """Check that node `index` can be lowered exactly; return its Lookup (for unary tables) or None.
    Reads the op's facts (table, bilinear, compares) from its OpDef."""
    node, attrs = graph.nodes[index], analysis.attrs[index]
    where, opdef = node.output, OPSETS[graph.opset][node.op]
    if (graph.opset, node.op) not in RULES:
        why = REFUSED.get((graph.opset, node.op), "")
        raise FHEUnsupported("fhe.op", f"op {node.op!r} has no FHE lowering in opset {graph.opset}"
                                       + (f": {why}" if why else ""), where)
    infos = [analysis.tensors[n] for n in node.inputs]
    consts = [graph.constants[n].astype(np.int64) for n in node.inputs if n in graph.constants]
    acts = [i for n, i in zip(node.inputs, infos) if n not in graph.constants]
    x = infos[0]
    if opdef.table and len(acts) > 1:
        bits = sum(int_bits(a.lo, a.hi) for a in acts)
        if bits > budget:
            raise FHEUnsupported("fhe.lookup_bits", f"{node.op} of {len(acts)} activations is a multi-input table "
                                                    f"of {bits} bits > budget {budget}", where)
        return None
    if opdef.bilinear and len(acts) == 2:  # x*y = ((x+y)^2 - (x-y)^2) / 4: two squares
        a, b = acts
        for lo, hi in ((a.lo + b.lo, a.hi + b.hi), (a.lo - b.hi, a.hi - b.lo)):
            _check_bits(f"{node.op} of two activations squares values in [{lo}, {hi}]", lo, hi, budget, where)
        return None
    if opdef.compares:
        _check_bits(f"{node.op} compares values in [{x.lo}, {x.hi}]: their differences need", x.lo - x.hi,
                    x.hi - x.lo, budget, where)
    if not opdef.table:
        return None
    out_shape = analysis.tensors[where].shape
    if out_shape != x.shape:
        raise FHEUnsupported("fhe.shape", f"{node.op} broadcasts its input {x.shape} to {out_shape}: "
                                          f"a table keeps its input's shape", where)
    profile = opdef.profile(attrs, consts, x.shape)
    probe = Lookup(opdef, attrs, tuple(consts), profile, LookupPlan(x.lo, x.hi, 0, 0, 0))
    try:
        plan = plan_lookup(probe.on_domain, x.lo, x.hi, budget, monotone=opdef.table == TABLE_MONOTONE,
                           node=where, what=f"{node.op} lookup")
    except FHEUnsupported as refused:
        if not _saturating_rounding(node.op, attrs, consts):
            raise
        try:
            plan = plan_clamp(*_scaled_interval(x.lo, x.hi, consts[0]), attrs["shift"], attrs["bits"], budget,
                              node=where)
        except FHEUnsupported as split:
            raise FHEUnsupported(refused.rule, f"{refused.detail}; nor does its split (cvm.interp.fhe_clamp): "
                                               f"{split.detail}", where) from None
    return Lookup(opdef, attrs, tuple(consts), profile, plan)


MAX_SPLIT_MULTIPLIER = 16  # x * m widens every value before the split's roundings: one bootstrap per bit


def _saturating_rounding(op: str, attrs: dict, consts: list) -> bool:
    """requant(x, m, shift, bits) with small multipliers 1 <= m <= MAX_SPLIT_MULTIPLIER: the rounding
    clip(round_shift(x * m, shift)) of a leveled clear product, whose own clip saturates (fhe_clamp)."""
    return op == "requant" and len(consts) == 1 and attrs["shift"] >= 1 \
        and 1 <= int(consts[0].min()) and int(consts[0].max()) <= MAX_SPLIT_MULTIPLIER


def _scaled_interval(lo: int, hi: int, m: np.ndarray) -> tuple[int, int]:
    """The interval of x * m_c over x in [lo, hi] and every multiplier m_c >= 1."""
    ends = [lo * int(m.min()), lo * int(m.max()), hi * int(m.min()), hi * int(m.max())]
    return min(ends), max(ends)


# ---------------------------------------------------------------- rules: (ctx, node, attrs, args) -> tracer


class Ctx:
    def __init__(self, graph: Graph, analysis: Analysis, lookups: dict):
        self.graph, self.analysis, self.lookups = graph, analysis, lookups

    def interval(self, name: str) -> tuple[int, int]:
        t = self.analysis.tensors[name]
        return t.lo, t.hi


def _lookup(ctx, node, attrs, args):
    if node.output not in ctx.lookups:  # a table of two activations (div by an activation)
        (xlo, xhi), (dlo, dhi) = ctx.interval(node.inputs[0]), ctx.interval(node.inputs[1])
        f = OPSETS[ctx.graph.opset][node.op].reference
        return fhe.multivariate(lambda x, d: f(np.clip(x, xlo, xhi), np.clip(d, dlo, dhi)))(args[0], args[1])
    lk: Lookup = ctx.lookups[node.output]
    v, plan = args[0], lk.plan
    if isinstance(plan, ClampPlan):
        m = lk.consts[0]
        if m.size > 1 or int(m[0]) != 1:
            shape = ctx.analysis.tensors[node.inputs[0]].shape
            axis = lk.attrs["axis"] if m.size > 1 else 0
            m = m.reshape((m.size,) + (1,) * (len(shape) - 1 - axis)) if m.size > 1 else int(m[0])
            v = pin(v * m, plan.lo, plan.hi)
        return _saturating(v, plan)
    if plan.shift:
        if plan.offset:
            v = pin(v + plan.offset, plan.lo + plan.offset, plan.hi + plan.offset)
        v = pin(fhe.round_bit_pattern(v, plan.shift, exactness=fhe.Exactness.EXACT),
                *rounded_pin(plan.lo + plan.offset, plan.hi + plan.offset, plan.shift))
    return fhe.univariate(lk.table)(v)


def _saturating(v, plan: ClampPlan):
    """clip(round_shift(x, r), -L, L) as fhe_clamp splits it: two exact roundings, three narrow tables."""
    exact = fhe.Exactness.EXACT
    a = pin(v + plan.high_offset, *plan.high_interval())
    rh = pin(fhe.round_bit_pattern(a, plan.high_shift, exactness=exact),
             *rounded_pin(*plan.high_interval(), plan.high_shift))
    kind = pin(fhe.univariate(plan.kind_table)(rh), 0, max(plan.kinds) << plan.high_shift)
    base = pin(fhe.univariate(plan.base_table)(rh), *plan.base_interval())
    rem = pin(a - rh, -(1 << (plan.high_shift - 1)), (1 << (plan.high_shift - 1)) - 1)
    plo, phi = plan.packed_interval()
    half = (1 << (plan.high_shift - 1)) + (1 << (plan.shift - 1))
    packed = pin(pin(rem + kind, plo - half, phi - half) + half, plo, phi)
    rp = pin(fhe.round_bit_pattern(packed, plan.shift, exactness=exact), *rounded_pin(plo, phi, plan.shift))
    row = pin(fhe.univariate(plan.row_table)(rp), *plan.row_interval())
    return pin(base + row, -plan.limit, plan.limit)


def _dense(ctx, node, attrs, args):
    x, w = args[0], args[1]
    lo, hi = mac_bound(w, ctx.interval(node.inputs[0]))
    y = pin(x @ w.T, lo, hi)
    return y + args[2] if len(args) == 3 else y


def _canvas(shape, fill: int, x, where: tuple, x_interval: tuple[int, int]):
    """A tensor of `fill` with x written at `where` (padding, since TFHE convolution has none)."""
    c = pin(fhe.zeros(shape), 0, 0)
    if fill:
        c = pin(c + fill, fill, fill)
    c[where] = x
    return pin(c, min(fill, x_interval[0]), max(fill, x_interval[1]))


def _padded4(x, name: str, ctx, pads, fill: int):
    """One sample [C,H,W] -> [1,C,H',W'] padded with `fill`."""
    lo, hi = ctx.interval(name)
    c, h, w = ctx.analysis.tensors[name].shape
    x4 = pin(x.reshape((1, c, h, w)), lo, hi)
    pt, pl, pb, pr = pads
    if not any(pads):
        return x4
    return _canvas((1, c, h + pt + pb, w + pl + pr), fill, x4, (slice(None), slice(None), slice(pt, pt + h),
                                                                 slice(pl, pl + w)), (lo, hi))


def _conv2d(ctx, node, attrs, args):
    x4 = _padded4(args[0], node.inputs[0], ctx, attrs["pads"], 0)
    y = fhe.conv(x4, args[1], args[2] if len(args) == 3 else None, pads=(0, 0, 0, 0), strides=attrs["strides"],
                 dilations=attrs["dilations"], group=attrs["groups"])
    return pin(y, *ctx.interval(node.output)).reshape(ctx.analysis.tensors[node.output].shape)


def _isolated(y, lo: int, hi: int):
    """y through an identity table. concrete gives the inputs and output of a leveled op one bit
    width, so a max feeding a wide dense would compare at the dense's width (a 4-bit pool before a
    9-bit dense needed 4.4 GB of keys); after a table the comparison keeps its own narrow width."""
    return fhe.univariate(lambda v: v)(pin(y, lo, hi))


def _max_pool2d(ctx, node, attrs, args):
    lo, _ = ctx.interval(node.inputs[0])
    x4 = _padded4(args[0], node.inputs[0], ctx, attrs["pads"], lo)
    y = fhe.maxpool(x4, kernel_shape=attrs["kernel"], strides=attrs["strides"], dilations=attrs["dilations"])
    y = pin(_isolated(y, *ctx.interval(node.output)), *ctx.interval(node.output))
    return y.reshape(ctx.analysis.tensors[node.output].shape)


def _encrypted(ctx, name: str, value):
    """Constants enter concat as encrypted tensors (concrete joins encrypted values only)."""
    if not isinstance(value, np.ndarray):
        return value
    return pin(pin(fhe.zeros(value.shape), 0, 0) + value, int(value.min()), int(value.max()))


def _pad(ctx, node, attrs, args):
    shape, pads = ctx.analysis.tensors[node.inputs[0]].shape, attrs["pads"]
    r = len(shape)
    out = tuple(d + pads[i] + pads[i + r] for i, d in enumerate(shape))
    where = tuple(slice(pads[i], pads[i] + d) for i, d in enumerate(shape))
    return _canvas(out, attrs["value"], args[0], where, ctx.interval(node.inputs[0]))


RULES_V1 = {
    "dense": _dense,
    "conv2d": _conv2d,
    "matmul": lambda ctx, node, attrs, args: args[0] @ args[1],
    "add": lambda ctx, node, attrs, args: args[0] + args[1],
    "sub": lambda ctx, node, attrs, args: args[0] - args[1],
    "mul": lambda ctx, node, attrs, args: args[0] * args[1],
    "requant": _lookup, "relu": _lookup, "clip": _lookup, "lut": _lookup, "div": _lookup,
    "max_pool2d": _max_pool2d,
    "sum": lambda ctx, node, attrs, args: np.sum(args[0], axis=attrs["axes"], keepdims=bool(attrs["keepdims"])),
    "max": lambda ctx, node, attrs, args: np.max(args[0], axis=attrs["axes"], keepdims=bool(attrs["keepdims"])),
    "reshape": lambda ctx, node, attrs, args: args[0].reshape(tuple(attrs["shape"])),
    "flatten": lambda ctx, node, attrs, args: args[0].reshape((int(np.prod(ctx.analysis.tensors[node.output].shape)),)),
    "transpose": lambda ctx, node, attrs, args: np.transpose(args[0], axes=attrs["perm"]),
    "concat": lambda ctx, node, attrs, args: np.concatenate(
        tuple(_encrypted(ctx, n, a) for n, a in zip(node.inputs, args)), axis=attrs["axis"]),
    "pad": _pad,
    "slice": lambda ctx, node, attrs, args: args[0][tuple(map(slice, attrs["starts"], attrs["ends"], attrs["steps"]))],
}


RULES_V2 = derive(RULES_V1, {})  # opset 2 (cvm.ops.vision)
RULES = by_opset({1: RULES_V1, 2: RULES_V2})  # (opset, op) -> (ctx, node, attrs, args) -> tracer
REFUSED: dict[tuple[int, str], str] = repriced_keys({  # (opset, op) -> why no circuit computes it exactly
    (2, "resize2d"): "no rule yet: nearest is a static gather (indexing by constant index arrays) and linear a "
                     "4-tap sum whose final rounding shift by 2*frac_bits is an exact round_bit_pattern over "
                     "bits + 2*frac_bits + 2 bits; neither is written or checked against concrete",
    (2, "conv_transpose2d"): "no rule yet: concrete's fhe.conv has no transposed form; a zero-stuffed input and a "
                             "flipped-kernel fhe.conv would compute it, not written or checked against concrete",
    (2, "gather"): "no rule yet: an encrypted index into a table of rows is one lookup per row column over the "
                   "index (fhe.LookupTable per embedding dimension), not written or checked against concrete",
    (2, "isqrt"): "no rule yet: a monotone table over the input's bits (a 31-bit variance exceeds the lookup "
                  "budget unless rounded first), not written or checked against concrete",
})


def plan_graph(graph: Graph, analysis: Analysis, budget: int) -> dict[str, Lookup]:
    """Check every node before tracing; the lookups' plans, keyed by node output."""
    lookups = {}
    for i, node in enumerate(graph.nodes):
        lk = plan_node(graph, analysis, i, budget)
        if lk is not None:
            lookups[node.output] = lk
    return lookups


def make_function(graph: Graph, analysis: Analysis, lookups: dict):
    """The function concrete traces: one positional parameter per graph input, one sample each."""
    ctx = Ctx(graph, analysis, lookups)
    consts = {name: v.astype(np.int64) for name, v in graph.constants.items()}

    def function(**inputs):  # concrete passes x0, x1, ... by name
        env = {}
        for i, spec in enumerate(graph.inputs):
            env[spec.name] = pin(inputs[f"x{i}"], *ctx.interval(spec.name))
        for node, attrs in zip(graph.nodes, analysis.attrs):
            args = [env[n] if n in env else consts[n] for n in node.inputs]
            with fhe.tag(node.output):
                env[node.output] = pin(RULES[graph.opset, node.op](ctx, node, attrs, args), *ctx.interval(node.output))
        outs = tuple(env[n] for n in graph.outputs)
        return outs if len(outs) > 1 else outs[0]

    params = [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in range(len(graph.inputs))]
    function.__signature__ = inspect.Signature(params)
    function.__name__ = "cvm_model"
    return function
