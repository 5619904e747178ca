"""The only ops that round or look up: requant (multiply + rounding right shift + clip), lut, div."""
from __future__ import annotations


from .. import gas
from ..limits import MAX_AXIS, MAX_BITS, MAX_LUT_SIZE, MAX_SHIFT
from ..arith import INT64_MAX, bits_max, div_round, round_shift
from .elementwise import _binary_shape
from .base import TABLE_ANY, TABLE_MONOTONE, Attr, OpDef, RuleError, broadcast_shapes, clamp, corners, elements, require

# ---------------------------------------------------------------- requant

def requant_shape(args, a):
    x, m = args[0].shape, args[1].shape
    require(0 <= a["shift"] <= MAX_SHIFT, "attrs.shift", f"shift must be in 0..{MAX_SHIFT}, got {a['shift']}")
    require(1 <= a["bits"] <= MAX_BITS, "attrs.bits", f"bits must be in 1..{MAX_BITS}, got {a['bits']}")
    require(len(m) == 1, "shape.multiplier", f"multiplier must be 1-D, got shape {m}")
    require(0 <= a["axis"] <= MAX_AXIS, "attrs.axis", f"axis must be in 0..{MAX_AXIS}, got {a['axis']}")
    if m[0] != 1:
        require(0 <= a["axis"] < len(x), "attrs.axis", f"axis {a['axis']} out of range for a rank-{len(x)} sample")
        require(x[a["axis"]] == m[0], "shape.multiplier",
                f"{m[0]} multipliers for {x[a['axis']]} channels on axis {a['axis']}")
    require(args[1].lo >= 0, "value.multiplier", "multipliers must be >= 0")
    return x


def requant_bound(args, a, out):
    x, s, b = args[0], a["shift"], a["bits"]
    mmin, mmax = args[1].lo, args[1].hi  # a constant's interval is its exact min and max
    worst = max(abs(x.lo), abs(x.hi)) * mmax + (1 << s >> 1)
    if worst > INT64_MAX:
        raise RuleError("bits.int64", f"x*multiplier + rounding term may reach {worst}, beyond int64")
    lim = bits_max(b)
    lo = min(round_shift(x.lo * v, s) for v in (mmin, mmax))
    hi = max(round_shift(x.hi * v, s) for v in (mmin, mmax))
    return min(max(lo, -lim), lim), min(max(hi, -lim), lim)


def requant_cost(args, a, out):
    return elements(out) * (gas.GAS_PER_REQUANT + gas.GAS_PER_ELEMENT)


def requant_ref(x, m, *, shift, bits, axis):
    if m.shape[0] != 1:
        m = m.reshape((m.shape[0],) + (1,) * (x.ndim - 2 - axis))
    lim = bits_max(bits)
    return clamp(round_shift(x * m, shift), -lim, lim)


def requant_profile(a, consts, shape):
    """Per-channel multipliers make the element function vary along `axis`."""
    prof = [1] * len(shape)
    if consts[0].shape[0] > 1:
        prof[a["axis"]] = shape[a["axis"]]
    return tuple(prof)


REQUANT = OpDef(
    "requant", 2, 2, {"shift": Attr("int"), "bits": Attr("int"), "axis": Attr("int", 0)},
    requant_shape, requant_bound, requant_cost, requant_ref,
    const_inputs=(1,), activation_inputs=(0,),
    doc="y = clip(floor((x*m + 2^(s-1)) / 2^s), -(2^(bits-1)-1), 2^(bits-1)-1); m per tensor or along axis",
    table=TABLE_MONOTONE, table_profile=requant_profile,
)


# ---------------------------------------------------------------- lut

def lut_shape(args, a):
    t = args[1].shape
    require(len(t) == 1 and 1 <= t[0] <= MAX_LUT_SIZE, "shape.table", f"table must be 1-D with 1..{MAX_LUT_SIZE} entries, got {t}")
    x, off = args[0], a["offset"]
    require(off <= x.lo and x.hi - off < t[0], "value.lut_domain",
            f"input interval [{x.lo}, {x.hi}] is not covered by the table's domain [{off}, {off + t[0] - 1}]")
    return x.shape


def lut_bound(args, a, out):
    reach = args[1].const[args[0].lo - a["offset"]: args[0].hi - a["offset"] + 1]
    return int(reach.min()), int(reach.max())


def lut_cost(args, a, out):
    return elements(out) * (gas.GAS_PER_LOOKUP + gas.GAS_PER_ELEMENT)


def lut_ref(x, table, *, offset):
    return table[x - offset]


LUT = OpDef("lut", 2, 2, {"offset": Attr("int")}, lut_shape, lut_bound, lut_cost, lut_ref,
            const_inputs=(1,), activation_inputs=(0,), doc="y = table[x - offset]", table=TABLE_ANY)


# ---------------------------------------------------------------- div

def div_shape(args, a):
    _binary_shape(args, a)
    require(args[1].lo >= 1, "value.divisor", f"divisor interval [{args[1].lo}, {args[1].hi}] is not proven >= 1")
    out = broadcast_shapes(args[0].shape, args[1].shape)
    act_rank = max(len(x.shape) for x in args if not x.is_const)
    require(len(out) == act_rank, "shape.const_rank", "a constant operand has more axes than the activation")
    return out


def div_bound(args, a, out):
    return corners(div_round, (args[0].lo, args[0].hi), (args[1].lo, args[1].hi))


def div_cost(args, a, out):
    return elements(out) * (gas.GAS_PER_DIVISION + gas.GAS_PER_ELEMENT)


def div_profile(a, consts, shape):
    """A constant divisor makes the element function vary along the axes it does not broadcast over."""
    prof = [1] * len(shape)
    d = consts[0]
    for i in range(d.ndim):
        ax = len(shape) - d.ndim + i
        prof[ax] = shape[ax] if d.shape[i] > 1 else 1
    return tuple(prof)


DIV = OpDef("div", 2, 2, {}, div_shape, div_bound, div_cost, div_round,
            activation_inputs=(0,), doc="y = floor((2x + d) / (2d)), d proven >= 1",
            table=TABLE_MONOTONE, table_profile=div_profile)

OPS = [REQUANT, LUT, DIV]
