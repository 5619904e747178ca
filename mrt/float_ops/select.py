"""Selecting and reducing float ops: slice (strided ranges on non-batch axes), reduce_max, argmax.
Gather, Split, Squeeze/Unsqueeze, Tile, Expand and the other reductions import as these plus
reshape, concat, sum and element-wise ops (mrt.onnx_import.ops_shape)."""
import numpy as np

from mrt.errors import GraphError

F32 = np.float32


def slice_(x, *, axes, starts, ends, steps):
    index = [slice(None)] * x.ndim
    for a, s, e, k in zip(axes, starts, ends, steps):
        index[a] = slice(s, e, k)
    return x[tuple(index)]


def slice_shape(x, *, axes, starts, ends, steps):
    if not len(axes) == len(starts) == len(ends) == len(steps) or len(set(axes)) != len(axes):
        raise GraphError(f"slice: axes {axes}, starts, ends and steps must have one entry per distinct axis")
    out = list(x)
    for a, s, e, k in zip(axes, starts, ends, steps):
        if not 0 < a < len(x):
            raise GraphError(f"slice: axis {a} is the batch axis or out of range for {x}")
        if not (k >= 1 and 0 <= s < e <= x[a]):
            raise GraphError(f"slice: [{s}:{e}:{k}] is not a non-empty forward range of 0..{x[a]}")
        out[a] = len(range(s, e, k))
    return tuple(out)


def reduce_max(x, *, axes, keepdims):
    return x.max(axis=tuple(axes), keepdims=bool(keepdims)).astype(F32)


def reduce_max_shape(x, *, axes, keepdims):
    if not axes or len(set(axes)) != len(axes) or not all(0 < a < len(x) for a in axes):
        raise GraphError(f"reduce_max: axes {axes} must be distinct non-batch axes of {x}")
    return tuple(1 if i in axes else d for i, d in enumerate(x) if keepdims or i not in axes)


def argmax(x, *, axis, keepdims, select_last_index):
    """The index of the largest value along `axis` (the first one, or the last with select_last_index),
    as a float32 tensor like every IR tensor."""
    if select_last_index:
        flipped = np.flip(x, axis=axis).argmax(axis=axis)
        idx = x.shape[axis] - 1 - flipped
    else:
        idx = x.argmax(axis=axis)
    return (np.expand_dims(idx, axis) if keepdims else idx).astype(F32)


def argmax_shape(x, *, axis, keepdims, select_last_index):
    return reduce_max_shape(x, axes=(axis,), keepdims=keepdims)


# name: (run, shape rule, attribute names, (min inputs, max inputs))
SELECT = {
    "slice": (slice_, slice_shape, ("axes", "starts", "ends", "steps"), (1, 1)),
    "reduce_max": (reduce_max, reduce_max_shape, ("axes", "keepdims"), (1, 1)),
    "argmax": (argmax, argmax_shape, ("axis", "keepdims", "select_last_index"), (1, 1)),
}
