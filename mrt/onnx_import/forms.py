"""The two forms an ONNX activation is stored in (mrt.onnx_import.one_sample): with a size-1 unit axis where the
CVM batch axis stands (`ctx.batch_axes`, 0 where absent), or whole (`ctx.whole`); and the one reshape that moves
a tensor from one form to another."""
from __future__ import annotations

from mrt.errors import UnsupportedOp
from mrt.graph import fresh_name
from mrt.onnx_import.attrs import where

WHOLE = None  # the form of a tensor stored with every ONNX axis (a unit axis k is an int)


def form(ctx, name):
    """WHOLE, or the unit axis of an activation."""
    return WHOLE if name in ctx.whole else ctx.batch_axes.get(name, 0)


def set_form(ctx, name, value):
    ctx.whole.discard(name)
    ctx.batch_axes.pop(name, None)
    if value is WHOLE:
        ctx.whole.add(name)
    elif value:
        ctx.batch_axes[name] = value


def stored(ctx, name, node, want, rank=None):
    """The name of activation `name` stored in form `want` (a unit axis, or WHOLE with at least `rank` ONNX axes:
    leading 1s added, as broadcasting reads a lower-rank operand). One reshape, made once per tensor and form."""
    s = ctx.onnx_shape(name, node)
    target = (1,) * max(0, (rank or 0) - len(s)) + tuple(s)
    if form(ctx, name) == want and len(target) == len(s):
        return name
    key = (name, want, len(target))
    if key not in ctx.aliases:
        if want is WHOLE:
            per_sample = target
        elif target[want] != 1:
            raise UnsupportedOp(f"{where(node)}: {name!r} has {target[want]} entries on ONNX axis {want}, not 1")
        else:
            per_sample = target[:want] + target[want + 1:]
            if not per_sample:
                raise UnsupportedOp(f"{where(node)}: {name!r} of shape {list(target)} has no axis besides its unit "
                                    "axis (CVM has no rank-0 sample)")
        alias = fresh_name(f"{name}/{'whole' if want is WHOLE else f'unit{want}'}", ctx.taken())
        ctx.emit("reshape", [ctx.tensor(name, node)], {"shape": tuple(per_sample)}, node, out=alias)
        set_form(ctx, alias, want)
        if name in ctx.integer_tensors:  # the same values: Cast and Div read the alias's type
            ctx.integer_tensors.add(alias)
        ctx.aliases[key] = alias
    return ctx.aliases[key]
