"""Full-shape arithmetic with a symbolic batch axis.

Shape rules see FULL shapes: a batched tensor (a graph input or anything computed from one) has
the marker `BATCH` at axis 0 and concrete ints elsewhere; a constant has its plain array shape.
Rules never do arithmetic on `BATCH`, so an op that would reduce, move or mix the batch axis is
caught here, by name, instead of computing something batch-size dependent.
"""
from math import prod

from cvm import arith
from mrt.errors import GraphError


class _Batch:
    """The symbolic batch dimension (one immutable instance, `BATCH`)."""

    __slots__ = ()

    def __repr__(self):
        return "N"


BATCH = _Batch()


def is_batched(shape):
    return len(shape) > 0 and shape[0] is BATCH


def check_batched_result(shape, op):
    """A rule's output for batched inputs must keep the batch axis at 0 and nowhere else."""
    if not is_batched(shape) or any(d is BATCH for d in shape[1:]):
        raise GraphError(f"{op}: result shape {shape} does not keep the batch axis at axis 0")
    return shape


def broadcast(*shapes, op="broadcast"):
    """numpy broadcasting where `BATCH` only meets `BATCH` or 1 (a constant never varies along
    the batch). Batched operands must have the same rank, so that their batch axes line up."""
    ranks = {len(s) for s in shapes if is_batched(s)}
    if len(ranks) > 1:
        raise GraphError(f"{op}: batched operands of different ranks {shapes} would misalign "
                         "the batch axis")
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if BATCH in dims and len(dims) > 1:
            raise GraphError(f"{op}: a constant of shape in {shapes} broadcasts against the "
                             "batch axis")
        if len(dims) > 1:
            raise GraphError(f"{op}: shapes {shapes} do not broadcast")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def norm_axis(axis, rank, op, allow_batch=False):
    """Resolve a negative axis; the batch axis 0 is refused unless the caller allows it."""
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise GraphError(f"{op}: axis {axis} out of range for rank {rank}")
    if a == 0 and not allow_batch:
        raise GraphError(f"{op}: axis {axis} is the batch axis, which must not be touched")
    return a


def numel(shape):
    """Element count of a shape without its batch axis (per sample for batched shapes)."""
    return prod(shape[1:]) if is_batched(shape) else prod(shape)


def window_out(size, kernel, stride, dilation, pad_begin, pad_end):
    """Output length of a sliding window (conv, pools) over `size` padded elements."""
    out = arith.window_out(size, kernel, stride, dilation, pad_begin, pad_end)
    if out < 1:
        raise GraphError(f"window of span {dilation * (kernel - 1) + 1} does not fit input {size} with pads "
                         f"({pad_begin}, {pad_end})")
    return out
