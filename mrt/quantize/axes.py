"""The one crossing of the axis convention: MRT's float IR counts the batch axis (axis 0 is the
batch), CVM counts per-sample axes. `per_sample(node)` converts every axis-bearing attribute of a
float node once, from AXIS_ATTRS, before its quantization rule runs; rules then read CVM axes only,
so a new axis-bearing op adds a line here and has no off-by-one of its own."""
from __future__ import annotations

from dataclasses import replace

from mrt.quantize.state import QuantizeError


def _axis(a: int) -> int:
    if a < 1:
        raise QuantizeError(f"axis {a} is the batch axis, which an integer model cannot touch")
    return a - 1


def _axes(axes) -> tuple[int, ...]:
    return tuple(_axis(a) for a in axes)


def _perm(perm) -> tuple[int, ...]:
    """A permutation that keeps the batch axis first, without it."""
    if perm[0] != 0:
        raise QuantizeError(f"transpose {list(perm)} moves the batch axis")
    return tuple(p - 1 for p in perm[1:])


def _pads(pads) -> tuple[int, ...]:
    """ONNX-style [begin per axis..., end per axis...] over every axis, without the batch axis's two."""
    r = len(pads) // 2
    if pads[0] or pads[r]:
        raise QuantizeError(f"pads {list(pads)} pad the batch axis")
    return tuple(pads[1:r]) + tuple(pads[r + 1:])


KINDS = {"axis": _axis, "axes": _axes, "perm": _perm, "pads": _pads}

AXIS_ATTRS: dict[str, dict[str, str]] = {  # float op -> {attribute: kind}; conv/pool pads are spatial only
    "softmax": {"axis": "axis"},
    "concat": {"axis": "axis"},
    "sum": {"axes": "axes"},
    "reduce_max": {"axes": "axes"},
    "argmax": {"axis": "axis"},
    "slice": {"axes": "axes"},
    "transpose": {"perm": "perm"},
    "pad": {"pads": "pads"},
}


def per_sample(node):
    """`node` with its axis-bearing attributes in CVM's per-sample convention."""
    kinds = AXIS_ATTRS.get(node.op)
    if not kinds:
        return node
    attrs = dict(node.attrs)
    for name, kind in kinds.items():
        if name in attrs:
            attrs[name] = KINDS[kind](attrs[name])
    return replace(node, attrs=attrs)
