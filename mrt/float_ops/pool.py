"""Pooling and reductions over spatial axes: max_pool, avg_pool, sum_pool (the window sum that
rewrite_avg_pool lowers avg_pool to), global_avg_pool, and sum over given axes."""
import numpy as np

from mrt.errors import GraphError
from mrt.float_ops.shapes import window_out
from mrt.float_ops.window import kernel_axes, out_shape, pad_spatial, shifted, windows

F32 = np.float32


def with_end_pads(pads, extra):
    """pads (begins, ends) with `extra` added to the ends."""
    nd = len(pads) // 2
    return tuple(pads[:nd]) + tuple(p + e for p, e in zip(pads[nd:], extra))


def max_pool(x, *, kernel, strides, pads, dilations):
    """The maximum over kernel positions, one vectorised pass per position."""
    xp = pad_spatial(x, pads, -np.inf)
    out = out_shape(xp.shape[2:], kernel, strides, dilations)
    y = None
    for pos in np.ndindex(*kernel):
        view = shifted(xp, pos, out, strides, dilations)
        y = view.astype(F32) if y is None else np.maximum(y, view, out=y)
    return y


def sum_pool(x, *, kernel, strides, pads, dilations):
    """Window sum with zero padding (float64, in kernel-position order, rounded once)."""
    xp = pad_spatial(x, pads, 0)
    out = out_shape(xp.shape[2:], kernel, strides, dilations)
    acc = np.zeros((*xp.shape[:2], *out))
    for pos in np.ndindex(*kernel):
        acc += shifted(xp, pos, out, strides, dilations)
    return acc.astype(F32)


def avg_pool_counts(spatial, *, kernel, strides, pads, dilations, count_include_pad, ceil_pads):
    """How many elements each avg_pool window divides by, shape (*out): the real input
    elements, plus the explicit padding when count_include_pad; never the ceil_mode padding."""
    nd = len(kernel)
    if count_include_pad:
        mask = np.ones([s + pads[i] + pads[nd + i] for i, s in enumerate(spatial)])
        mask_pads = (0,) * nd + tuple(ceil_pads)
    else:
        mask = np.ones(spatial)
        mask_pads = with_end_pads(pads, ceil_pads)
    mw = windows(pad_spatial(mask[None, None], mask_pads, 0), kernel, strides, dilations)
    return mw.sum(axis=kernel_axes(nd))[0, 0]


def avg_pool(x, *, kernel, strides, pads, dilations, count_include_pad, ceil_pads):
    total = sum_pool(x, kernel=kernel, strides=strides, pads=with_end_pads(pads, ceil_pads),
                     dilations=dilations)
    counts = avg_pool_counts(x.shape[2:], kernel=kernel, strides=strides, pads=pads,
                             dilations=dilations, count_include_pad=count_include_pad,
                             ceil_pads=ceil_pads)
    return (total / counts).astype(F32)


def _pool_shape(x, kernel, strides, pads, dilations, op):
    nd = len(kernel)
    if len(x) != nd + 2 or nd < 1:
        raise GraphError(f"{op}: input {x} does not have {nd} spatial axes after (N, C)")
    if not (len(strides) == len(dilations) == nd and len(pads) == 2 * nd):
        raise GraphError(f"{op}: strides/dilations need {nd} values and pads {2 * nd}")
    if min(pads, default=0) < 0 or min((*kernel, *strides, *dilations)) < 1:
        raise GraphError(f"{op}: negative pads or non-positive kernel/strides/dilations")
    return (*x[:2], *(window_out(x[2 + i], kernel[i], strides[i], dilations[i], pads[i],
                                 pads[nd + i]) for i in range(nd)))


def max_pool_shape(x, *, kernel, strides, pads, dilations):
    return _pool_shape(x, kernel, strides, pads, dilations, "max_pool")


def sum_pool_shape(x, *, kernel, strides, pads, dilations):
    return _pool_shape(x, kernel, strides, pads, dilations, "sum_pool")


def avg_pool_shape(x, *, kernel, strides, pads, dilations, count_include_pad, ceil_pads):
    if len(ceil_pads) != len(kernel) or min(ceil_pads, default=0) < 0:
        raise GraphError(f"avg_pool: ceil_pads {ceil_pads} must be {len(kernel)} values >= 0")
    return _pool_shape(x, kernel, strides, with_end_pads(pads, ceil_pads), dilations,
                       "avg_pool")


def global_avg_pool(x):
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float64).astype(F32)


def global_avg_pool_shape(x):
    if len(x) < 3:
        raise GraphError(f"global_avg_pool: input {x} has no spatial axes")
    return (*x[:2], *(1 for _ in x[2:]))


def sum_(x, *, axes, keepdims):
    return x.sum(axis=tuple(axes), keepdims=keepdims, dtype=np.float64).astype(F32)


def sum_shape(x, *, axes, keepdims):
    if not axes or len(set(axes)) != len(axes) or not all(0 < a < len(x) for a in axes):
        raise GraphError(f"sum: axes {axes} must be distinct non-negative non-batch axes of {x}")
    return tuple(1 if i in axes else d for i, d in enumerate(x) if keepdims or i not in axes)


POOL = {
    "max_pool": (max_pool, max_pool_shape, ("kernel", "strides", "pads", "dilations"), (1, 1)),
    "sum_pool": (sum_pool, sum_pool_shape, ("kernel", "strides", "pads", "dilations"), (1, 1)),
    "avg_pool": (avg_pool, avg_pool_shape, ("kernel", "strides", "pads", "dilations",
                                            "count_include_pad", "ceil_pads"), (1, 1)),
    "global_avg_pool": (global_avg_pool, global_avg_pool_shape, (), (1, 1)),
    "sum": (sum_, sum_shape, ("axes", "keepdims"), (1, 1)),
}
