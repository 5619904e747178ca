"""Ops that move values without changing them: reshape, flatten, transpose, concat, pad, slice."""
from __future__ import annotations

import operator

import numpy as np

from .. import gas
from ..limits import MAX_GEOMETRY
from .base import Attr, OpDef, RuleError, elements, require, require_range, with_batch


def _same_bound(args, a, out):
    return args[0].lo, args[0].hi


def _copy_cost(args, a, out):
    return elements(out) * gas.GAS_PER_ELEMENT


def reshape_shape(args, a):
    shape = a["shape"]
    require(len(shape) >= 1 and min(shape) >= 1, "attrs.shape", f"reshape target {list(shape)} must be positive dims")
    require(elements(shape) == elements(args[0].shape), "shape.reshape",
            f"cannot reshape {args[0].shape} ({elements(args[0].shape)} elements) to {tuple(shape)}")
    return tuple(shape)


RESHAPE = OpDef("reshape", 1, 1, {"shape": Attr("ints")}, reshape_shape, _same_bound, _copy_cost,
                lambda x, *, shape: x.reshape((x.shape[0],) + tuple(shape)),
                activation_inputs=(0,), doc="row-major reshape of each sample")

FLATTEN = OpDef("flatten", 1, 1, {}, lambda args, a: (elements(args[0].shape),), _same_bound, _copy_cost,
                lambda x: x.reshape(x.shape[0], -1), activation_inputs=(0,),
                doc="row-major flatten of each sample to one axis")


def transpose_shape(args, a):
    perm, x = a["perm"], args[0].shape
    require(sorted(perm) == list(range(len(x))), "attrs.perm", f"perm {list(perm)} is not a permutation of {len(x)} axes")
    return tuple(x[p] for p in perm)


TRANSPOSE = OpDef("transpose", 1, 1, {"perm": Attr("ints")}, transpose_shape, _same_bound, _copy_cost,
                  lambda x, *, perm: x.transpose((0,) + with_batch(perm)), activation_inputs=(0,),
                  doc="y = x with per-sample axes permuted")


def concat_shape(args, a):
    """Per listed input only C-level work (map): a node of opsets 1-3 may list 10^6 inputs, which share
    a few Args (the verifier makes one per distinct name); the rules are checked over the distinct
    shapes, and the messages (which list every input's shape) are formatted only to raise."""
    ax, first = a["axis"], args[0].shape
    distinct = dict(zip(map(id, args), args)).values()
    require(any(not x.is_const for x in distinct), "node.const_only", "concat needs at least one activation input")
    shapes, rank = {x.shape for x in distinct}, len(first)
    if any(len(s) != rank for s in shapes):
        raise RuleError("shape.rank", f"concat inputs differ in rank: {list(map(_SHAPE, args))}")
    require(0 <= ax < rank, "attrs.axis", f"axis {ax} out of range for rank {rank}")
    if any(s[:ax] + s[ax + 1:] != first[:ax] + first[ax + 1:] for s in shapes):
        raise RuleError("shape.concat", f"concat inputs differ off axis {ax}: {list(map(_SHAPE, args))}")
    return first[:ax] + (sum(map(operator.itemgetter(ax), map(_SHAPE, args))),) + first[ax + 1:]


def concat_bound(args, a, out):
    return min(map(_LO, args)), max(map(_HI, args))


_SHAPE, _LO, _HI = (operator.attrgetter(f) for f in ("shape", "lo", "hi"))


def concat_ref(*xs, axis):
    """Each distinct input is laid out once, then one gather along the axis builds the output: the
    work is the output's elements plus a few list steps per input, however often an input repeats
    (a node may list one tensor 10^5 times and pays one gas per output element)."""
    ids = list(map(id, xs))  # per listing only C-level passes: ~80 ns each for 10^5 listings
    by_id = dict(zip(ids, xs))  # distinct inputs, in order of first listing
    position = {i: k for k, i in enumerate(by_id)}  # id -> index among distinct inputs
    distinct = list(by_id.values())
    nd = max(x.ndim for x in distinct)
    batch = next(x.shape[0] for x in distinct if x.ndim == nd)
    parts = [x if x.ndim == nd else np.broadcast_to(x, (batch,) + x.shape) for x in distinct]
    stacked = np.concatenate(parts, axis=axis + 1)
    if len(parts) == len(xs):
        return stacked
    which = np.fromiter(map(position.__getitem__, ids), np.intp, len(ids))
    sizes = np.array([p.shape[axis + 1] for p in parts])
    lengths = sizes[which]
    starts = (np.cumsum(sizes) - sizes)[which]  # where each input lies in `stacked`
    first = np.cumsum(lengths) - lengths  # where each input begins in the output
    index = np.repeat(starts - first, lengths) + np.arange(int(lengths.sum()))
    return np.take(stacked, index, axis=axis + 1)


CONCAT = OpDef("concat", 1, -1, {"axis": Attr("int")}, concat_shape, concat_bound, _copy_cost, concat_ref,
               doc="y = inputs joined along axis (constants are repeated over the batch)")


def pad_shape(args, a):
    x, pads = args[0].shape, a["pads"]
    require(len(pads) == 2 * len(x), "attrs.pads", f"pads must be {2 * len(x)} ints (all begins, then all ends)")
    require_range(pads, 0, MAX_GEOMETRY, "attrs.pads", "pads")
    return tuple(d + pads[i] + pads[i + len(x)] for i, d in enumerate(x))


def pad_ref(x, *, pads, value):
    """Constant padding. np.pad costs ~40 us a call whatever the size, which made a chain of tiny pads the
    reference's slowest node per gas, so a small x is written into an array filled with value (which writes
    every element twice: np.pad is faster from about 4,096 elements up)."""
    r = x.ndim - 1
    if x.size > 4096:
        return np.pad(x, [(0, 0)] + [(pads[i], pads[i + r]) for i in range(r)], constant_values=value)
    out = np.full((x.shape[0],) + tuple(x.shape[i + 1] + pads[i] + pads[i + r] for i in range(r)), value, x.dtype)
    out[(slice(None),) + tuple(slice(pads[i], pads[i] + x.shape[i + 1]) for i in range(r))] = x
    return out


PAD = OpDef("pad", 1, 1, {"pads": Attr("ints"), "value": Attr("int", 0)}, pad_shape,
            lambda args, a, out: (min(args[0].lo, a["value"]), max(args[0].hi, a["value"])), _copy_cost, pad_ref,
            activation_inputs=(0,), doc="constant padding of each sample with value")


def slice_shape(args, a):
    x = args[0].shape
    starts, ends, steps = a["starts"], a["ends"], a["steps"]
    require(len(starts) == len(ends) == len(steps) == len(x), "attrs.slice",
            f"starts, ends and steps need one entry per axis ({len(x)})")
    out = []
    for d, s, e, k in zip(x, starts, ends, steps):
        require(1 <= k <= MAX_GEOMETRY and 0 <= s < e <= d, "attrs.slice",
                f"slice [{s}:{e}:{k}] is not a non-empty range of 0..{d} with a step in 1..{MAX_GEOMETRY}")
        out.append((e - s + k - 1) // k)
    return tuple(out)


SLICE = OpDef("slice", 1, 1, {"starts": Attr("ints"), "ends": Attr("ints"), "steps": Attr("ints")}, slice_shape,
              _same_bound, _copy_cost,
              lambda x, *, starts, ends, steps: x[(slice(None),) + tuple(map(slice, starts, ends, steps))],
              activation_inputs=(0,), doc="y = x[starts:ends:steps] on every per-sample axis")

OPS = [RESHAPE, FLATTEN, TRANSPOSE, CONCAT, PAD, SLICE]
