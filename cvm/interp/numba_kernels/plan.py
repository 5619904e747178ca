"""The execution plan: the graph lowered once, at prepare time, to a flat list of steps.

A step names its input and output tensors and knows how to bind itself to buffers: `bind(ins, out)`
returns the kernel calls (calls.Call: fn and its named arguments) to run, with every array already
allocated, so a run is a loop over prebuilt calls. Multiply-accumulate nodes absorb the requant -> relu/clip chain that follows
them when nothing else reads the intermediate tensors (the fused output step).
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Callable

import numpy as np

from ...ir import Graph
from ...arith import INT32_MAX, INT32_MIN, bits_max
from ...values import storage_dtype
from ...verify import Analysis
from .calls import call
from .kargs import OST, pack
from .layout import C, FLAT, NHWC, Value, canonical
from .threads import Pool
from .tuning import DEFAULT_TUNING, Tuning

U8_READERS = frozenset({"conv2d", "dense", "max_pool2d", "requant"})  # ops whose lowerings read a uint8
# activation (Planner.unsigned_storage): numba kernels generic in the input dtype, which widen it first
OPEN_LO, OPEN_HI = INT32_MIN, INT32_MAX  # "no clamp": every value a kernel clamps is a tensor value,
# proven to fit int32 (the bounds reach int32 kernel arguments unchanged)


@dataclass
class Step:
    label: str
    inputs: tuple[str, ...]
    output: str
    value: Value
    bind: Callable  # (inputs: list[ndarray], out: ndarray) -> list[calls.Call]; ignored for views
    view: Callable | None = None  # (input array) -> output array, when the output is a view
    scratch: int = 0  # bytes per sample that bind() allocates besides the output (a padded copy)
    view_if_contiguous: bool = False  # view only where it is C-contiguous (bind copies otherwise)

    def bound_view(self, ins: list):
        """The output as a view of the input, or None when bind() must run: a slice of a batch of one
        is a contiguous piece of its input (no kernel call; a recurrent model slices every gate and
        time step), of a larger batch a strided one, which the kernels' reshapes would copy."""
        if self.view is None:
            return None
        v = self.view(ins[0])
        return v if not self.view_if_contiguous or v.flags.c_contiguous else None

    def __str__(self) -> str:
        return f"{self.output} = {self.label}({', '.join(self.inputs)}) [{self.value.layout} {self.value.dtype}]"


@dataclass(frozen=True)
class OutputStep:
    """What a multiply-accumulate kernel does with each accumulator before storing it:
    y = clip(floor((acc*mult[o] + rnd) / 2^shift), lo, hi)            (requant, relu, clip folded)
    y = table[y - offset]                                              (a lut, when one follows)
    and with a residual tensor r (an add after that):
    y = clip(floor(((y + r)*mult2[o] + rnd2) / 2^shift2), lo2, hi2)   (the add's requant, relu, clip)
    y = table2[y - offset2]                                            (and its lut)."""
    mult: np.ndarray  # int64, one per output channel
    shift: int
    lo: int
    hi: int
    residual: str | None
    mult2: np.ndarray
    shift2: int
    lo2: int
    hi2: int
    output: str  # the last fused node's output
    nodes: tuple[int, ...]  # indices of the fused nodes
    table: np.ndarray | None = None  # int64 lookup table of stage 1, and the index of its entry 0
    offset: int = 0
    table2: np.ndarray | None = None
    offset2: int = 0
    residual_const: np.ndarray | None = None  # int64, one per output channel: an add of a constant
    # constant along every other axis (a batch norm's shift after a scale), in place of a residual tensor
    res_mult: int = 1  # the residual tensor's own requant, when the add's operand was a per-tensor requant
    res_shift: int = 0  # of it that the step absorbed (output_step(residual_requant=True)):
    res_lo: int = OPEN_LO  # r = clip(floor((r*res_mult + rnd) / 2^res_shift), res_lo, res_hi) before the add
    res_hi: int = OPEN_HI

    def params(self) -> np.ndarray:
        """kargs.OST, then the tables (a stage's table starts at its lutK field; 0 when it has none)."""
        t1 = self.table if self.table is not None else np.zeros(0, np.int64)
        t2 = self.table2 if self.table2 is not None else np.zeros(0, np.int64)
        lut1 = len(OST) if len(t1) else 0
        lut2 = len(OST) + len(t1) if len(t2) else 0
        head = pack(OST, rnd=(1 << self.shift) >> 1, shift=self.shift, lo=self.lo, hi=self.hi,
                    has_residual=self.residual is not None or self.residual_const is not None, rnd2=(1 << self.shift2) >> 1, shift2=self.shift2,
                    lo2=self.lo2, hi2=self.hi2, lut1=lut1, lut1_off=self.offset, lut2=lut2, lut2_off=self.offset2,
                    rmul=self.res_mult, rrnd=(1 << self.res_shift) >> 1, rshift=self.res_shift, rlo=self.res_lo,
                    rhi=self.res_hi)
        return np.concatenate([head, t1, t2])


def fold_clamp(lo: int, hi: int, lo2: int, hi2: int) -> tuple[int, int]:
    """clip(clip(v, lo, hi), lo2, hi2) == clip(v, lo', hi') (lo2 <= hi2)."""
    return min(max(lo, lo2), hi2), max(min(hi, hi2), lo2)


class Planner:
    def __init__(self, graph: Graph, analysis: Analysis, isa: str, pool: Pool, tuning: Tuning = DEFAULT_TUNING):
        self.graph, self.analysis, self.isa, self.pool, self.tuning = graph, analysis, isa, pool, tuning
        self.values: dict[str, Value] = {}
        self.steps: list[Step] = []
        self._converted: dict[tuple[str, str], str] = {}
        self.due: dict[int, list[FusedGroup]] = {}  # node index -> fused groups to emit once it is reached
        self.claimed: set[int] = set()  # nodes a fused group computes (the lowering loop skips them)
        self.deferred: dict[str, tuple] = {}  # tensor -> what its reader applies instead of a step (lower_fused)
        self.paddable: set[str] = set()  # outputs of plain direct VNNI convs, which can be written padded
        self.out_pads: dict[str, tuple[int, int, int, int]] = {}  # those written padded for their reader (pad_fuse)
        # listings of each tensor; per listing only C-level work (a node of opsets 1-3 may list 10^6 inputs)
        self.uses = Counter(itertools.chain.from_iterable(map(attrgetter("inputs"), graph.nodes))) + Counter(graph.outputs)
        self.consumers = {}  # tensor -> the nodes that read it, each once
        self.producer = {node.output: i for i, node in enumerate(graph.nodes)}
        for i, node in enumerate(graph.nodes):
            for n in dict.fromkeys(node.inputs):
                self.consumers.setdefault(n, []).append(i)
        for inp in graph.inputs:
            self.values[inp.name] = self.spec_value(inp.name)

    # ------------------------------------------------------------ tensors

    def spec_value(self, name: str, layout: str = C) -> Value:
        info = self.analysis.tensors[name]
        return Value(tuple(info.shape), storage_dtype(info.bits), info.lo, info.hi, layout)

    def unsigned_storage(self, name: str, value: Value) -> Value:
        """`value` stored as uint8 where that is exact and every reader takes it: a tensor proven in
        0..255 (a relu output) that is no graph output, read only as the activation of ops whose
        lowerings accept any integer dtype (U8_READERS). Half the bytes of int16 written and read,
        and a VNNI conv reads it as its uint8 input in place (lower_mac: no padded copy when it has
        no padding). The values are the reference's: only their storage differs."""
        if value.dtype.itemsize == 1 or not 0 <= value.lo <= value.hi <= 255 or name in self.graph.outputs:
            return value
        readers = [self.graph.nodes[j] for j in self.consumers.get(name, [])]
        if not readers or any(r.op not in U8_READERS or r.inputs[0] != name or name in r.inputs[1:] for r in readers):
            return value
        return Value(value.shape, np.dtype(np.uint8), value.lo, value.hi, value.layout, value.chw)

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.constants.get(name)

    def add(self, label, inputs, output, value, bind, view=None, scratch: int = 0,
            view_if_contiguous: bool = False) -> str:
        self.steps.append(Step(label, tuple(inputs), output, value, bind, view, scratch, view_if_contiguous))
        self.values[output] = value
        return output

    def in_layout(self, name: str, layout: str) -> str:
        """The name of a tensor holding `name` stored in `layout` (a conversion step is added once)."""
        v = self.values[name]
        if v.layout == layout:
            return name
        key = (name, layout)
        if key not in self._converted:
            self._converted[key] = self._convert(name, v, layout)
        return self._converted[key]

    def viewable(self, name: str) -> str:
        """A tensor with a canonical view (layout "c" or "nhwc")."""
        return self.in_layout(name, C) if self.values[name].layout == FLAT else name

    def _convert(self, name: str, v: Value, layout: str) -> str:
        out = f"{name}@{layout}"
        if layout == NHWC and v.layout == FLAT:
            c, h, w = v.chw
            return self.add("flat->nhwc", [name], out, Value(v.chw, v.dtype, v.lo, v.hi, NHWC), None,
                            view=lambda x: x.reshape(x.shape[0], h, w, c))
        if layout == NHWC and len(v.shape) == 3 and v.shape[0] <= self.tuning.channels_last_loop_max_c:
            from .elementwise import to_channels_last
            h, min_rows = v.shape[1], self.tuning.to_nhwc_par_min_rows
            return self.add("to_nhwc", [name], out, v.with_layout(NHWC),
                            lambda ins, o: [self.pool.call(to_channels_last, (ins[0], o), o.shape[0] * h, min_rows)])
        if layout == NHWC:
            return self.add("to_nhwc", [name], out, v.with_layout(NHWC),
                            lambda ins, o: [call(np.copyto, o, ins[0].transpose(0, 2, 3, 1))])
        if v.layout == FLAT:
            c, h, w = v.chw
            return self.add("flat->c", [name], out, v.with_layout(C), lambda ins, o: [
                call(np.copyto, o.reshape(o.shape[0], c, h, w), ins[0].reshape(-1, h, w, c).transpose(0, 3, 1, 2))])
        return self.add("to_c", [name], out, v.with_layout(C),
                        lambda ins, o: [call(np.copyto, o, canonical(ins[0], v))])

    # ------------------------------------------------------------ fusion

    def fuse(self, head: int, nodes: tuple[int, ...], emit: Callable) -> None:
        """Record a fused group: node `head` and the `nodes` its step computes. The lowering loop
        skips the nodes, and `emit` (which adds the group's step) runs when the loop reaches the last
        of them, once every tensor the group reads exists."""
        group = FusedGroup(head, nodes, emit)
        self.claimed.update(nodes)
        self.due.setdefault(group.last, []).append(group)

    def _single_reader_chain(self, name: str):
        """The nodes after tensor `name` while each tensor has exactly one reader, is no graph output,
        and its reader is not already fused elsewhere: (index, node, attrs, the tensor it reads)."""
        nodes, attrs = self.graph.nodes, self.analysis.attrs
        while self.uses[name] == 1 and name not in self.graph.outputs and name in self.consumers:
            j = self.consumers[name][0]
            if j in self.claimed:
                return
            yield j, nodes[j], attrs[j], name
            name = nodes[j].output

    def residual_requant(self, name: str, shape: tuple[int, ...]) -> tuple[int, tuple[str, int, int, int, int]] | None:
        """(node index, (its input, mult, shift, lo, hi)) when tensor `name` is a per-tensor requant of an
        activation of `shape` that nothing else reads and that is not lowered yet: an output step
        may then read that input as its residual and requantize it itself (one pass over the tensor
        fewer: the identity shortcut of a ResNet block). Only of an input already stored (a
        downsample conv lowered later keeps the requant in its own output step)."""
        j = self.producer.get(name)
        if j is None or j in self.claimed or name in self.values or self.uses[name] != 1 or name in self.graph.outputs:
            return None
        node, a = self.graph.nodes[j], self.analysis.attrs[j]
        m = self.const(node.inputs[1]) if node.op == "requant" else None
        src = node.inputs[0] if node.op == "requant" else None
        if m is None or m.size != 1 or src not in self.values or self.analysis.tensors[src].shape != shape:
            return None
        lim, mult, shift = bits_max(a["bits"]), int(m.reshape(-1)[0]), a["shift"]
        x = self.values[src]
        lo, hi = ((v * mult + ((1 << shift) >> 1)) >> shift for v in (x.lo, x.hi))  # mult >= 0: monotonic
        if -lim <= lo and hi <= lim:  # the clamp never acts on the proven input interval: left open
            lim = None
        return j, (src, mult, shift, OPEN_LO if lim is None else -lim, OPEN_HI if lim is None else lim)

    def output_step(self, index: int, channel_axis: int, const_residual: bool = False,
                     include_head: bool = False, luts: bool = False, residual_requant: bool = False) -> OutputStep:
        """The chain after MAC node `index` that its output step computes (FUSION: [requant]
        [relu|clip]* [lut] [add(residual of the same shape) [requant] [relu|clip]* [lut]]).
        const_residual: the add may also be of a constant that is one value per channel (the
        lowering then passes OutputStep.residual_const as the residual, broadcast).
        include_head: node `index` is itself an element-wise node of the chain (its input is then
        what the step reads), not a MAC.
        luts: a lut may be absorbed (element-wise heads; after a conv it was measured slower than
        the lut's own pass: EfficientNet-B0 10.2 vs 7.8 ms, the lookups stall the GEMM's output step).
        residual_requant: the residual may be a per-tensor requant's input, the requant absorbed
        (residual_requant(); only for kernels whose out_rows reads OST's rmul..rhi: lower_mac)."""
        head = self.graph.nodes[index]
        info = self.analysis.tensors[head.output]
        ctx = FusionContext(self, info.shape, channel_axis, const_residual, luts)
        stages, k, residual, fused, last = [Stage.identity(info.shape[channel_axis])] * 2, 0, None, [], None
        rq = (1, 0, OPEN_LO, OPEN_HI)
        chain = self._single_reader_chain(head.output)
        if include_head:
            chain = itertools.chain([(index, head, self.analysis.attrs[index], head.inputs[0])], chain)
        for j, node, a, reads in chain:
            if node.op == "add" and k == 0 and (other := ctx.residual_of(node, reads)) is not None:
                k, residual = 1, other
                if residual_requant and isinstance(other, str) and (r := self.residual_requant(other, info.shape)):
                    fused.append(r[0])
                    residual, rq = r[1][0], r[1][1:]
            elif (absorb := FUSION.get(node.op)) is not None and (st := absorb(ctx, stages[k], node, a)) is not None:
                stages[k] = st
            else:
                break
            fused.append(j)
            last = node.output
        (s1, s2), name = stages, last or self.graph.nodes[index].output
        vec = residual if isinstance(residual, np.ndarray) else None
        return OutputStep(s1.mult, s1.shift, s1.lo, s1.hi, None if vec is not None else residual, s2.mult, s2.shift,
                          s2.lo, s2.hi, name, tuple(fused), s1.table, s1.offset, s2.table, s2.offset, vec, *rq)


@dataclass(frozen=True)
class FusedGroup:
    """A MAC node and the nodes its output step computes, emitted as one step at the last of them."""
    head: int
    nodes: tuple[int, ...]
    emit: Callable

    @property
    def last(self) -> int:
        return max((self.head,) + self.nodes)


@dataclass(frozen=True)
class Stage:
    """One requant -> clamp stage of an output step: v -> clip(floor((v*mult + rnd) / 2^shift), lo, hi)."""
    mult: np.ndarray  # int64, one per output channel
    shift: int
    lo: int
    hi: int
    requant: bool  # a requant was absorbed (at most one per stage, before any clamp)
    table: np.ndarray | None = None  # a lut absorbed last (it closes the stage): int64 table, offset
    offset: int = 0

    @staticmethod
    def identity(channels: int) -> "Stage":
        return Stage(np.ones(channels, np.int64), 0, OPEN_LO, OPEN_HI, False)


@dataclass(frozen=True)
class FusionContext:
    planner: "Planner"
    shape: tuple[int, ...]  # the MAC output's per-sample shape
    channel_axis: int
    const_residual: bool = False
    luts: bool = False

    def residual_of(self, node, reads: str) -> str | np.ndarray | None:
        """The other operand of an add when it is an activation of the MAC output's shape; with
        const_residual, also a constant that is one value per channel (returned as int64[C])."""
        other = node.inputs[1] if node.inputs[0] == reads else node.inputs[0]
        p = self.planner
        if other == reads:
            return None
        if (c := p.const(other)) is not None:
            return channel_vector(c, self.shape, self.channel_axis) if self.const_residual else None
        return other if p.analysis.tensors[other].shape == self.shape else None


def channel_vector(c: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """c as one int64 value per channel (axis `axis` of a sample of `shape`), when c broadcasts to
    the shape without changing it and is constant along every other axis."""
    if c.ndim > len(shape) or any(d not in (1, s) for d, s in zip(c.shape[::-1], shape[::-1])):
        return None
    full = np.broadcast_to(c.reshape((1,) * (len(shape) - c.ndim) + c.shape), shape).astype(np.int64)
    vec = np.moveaxis(full, axis, 0).reshape(shape[axis], -1)
    return np.ascontiguousarray(vec[:, 0]) if (vec == vec[:, :1]).all() else None


def _absorb_requant(ctx: FusionContext, st: Stage, node, a) -> Stage | None:
    """A requant opens a stage (per tensor, or per channel along the MAC's channel axis)."""
    if st.requant or (st.lo, st.hi) != (OPEN_LO, OPEN_HI) or st.table is not None:
        return None
    m = ctx.planner.const(node.inputs[1]).astype(np.int64)
    if m.shape[0] != 1 and a["axis"] != ctx.channel_axis:
        return None
    lim = bits_max(a["bits"])
    return Stage(np.broadcast_to(m, st.mult.shape).copy(), a["shift"], -lim, lim, True)


def _absorb_clamp(ctx: FusionContext, st: Stage, node, a) -> Stage | None:
    if st.table is not None:
        return None
    lo, hi = (0, OPEN_HI) if node.op == "relu" else (a["lo"], a["hi"])
    return replace(st, **dict(zip(("lo", "hi"), fold_clamp(st.lo, st.hi, lo, hi))))


def _absorb_lut(ctx: FusionContext, st: Stage, node, a) -> Stage | None:
    """A lut closes a stage: y = table[v - offset] on the stage's value v (the tensor the lut reads,
    which the verifier proved inside the table), up to Tuning.max_fused_table entries."""
    table = ctx.planner.const(node.inputs[1])
    if not ctx.luts or st.table is not None or table.size > ctx.planner.tuning.max_fused_table:
        return None
    return replace(st, table=table.reshape(-1).astype(np.int64), offset=a["offset"])


FUSION = {"requant": _absorb_requant, "relu": _absorb_clamp, "clip": _absorb_clamp,
          "lut": _absorb_lut}  # op -> absorb into a stage


def build(graph: Graph, analysis: Analysis, isa: str, pool: Pool, lowerings: dict,
          refused: dict | None = None, tuning: Tuning = DEFAULT_TUNING) -> tuple[Planner, dict[str, str]]:
    """Lower every node; returns the planner (values and steps) and graph output -> stored tensor.
    `lowerings` and `refused` (why an op is not lowered) are keyed by (opset, op); `tuning`: the
    measured choices (kernel paths, limits, thread splits) the lowerings read as p.tuning."""
    p = Planner(graph, analysis, isa, pool, tuning)
    for i, (node, attrs) in enumerate(zip(graph.nodes, analysis.attrs)):
        if i not in p.claimed:
            lower = lowerings.get((graph.opset, node.op))
            if lower is None:
                why = (refused or {}).get((graph.opset, node.op), "no lowering")
                raise NotImplementedError(f"the numba backend does not run op {node.op!r} of opset {graph.opset}: {why}")
            lower(p, i, node, attrs)
        for group in p.due.pop(i, []):
            group.emit()
    outputs = {name: p.in_layout(name, C) for name in graph.outputs}
    return p, outputs
