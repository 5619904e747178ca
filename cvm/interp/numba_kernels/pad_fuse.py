"""A VNNI conv's output written straight into the padded uint8 input of the one VNNI conv that reads it.

A conv with padding reads its input through a padded uint8 copy (vnni.to_padded_u8): ResNet-50's 16
3x3 convs copy 1.1-1.3 ms of their inputs a run at batch 8. Where that input is the uint8 output of a
conv2d[vnni] step with the plain output step (vnni_direct.conv_vnni_direct: a relu'd 1x1 conv before a
3x3 one) and nothing else reads it, the producer stores its outputs at their places inside the padded
array (conv_vnni_direct_padded maps output pixel (n, i, j) to row (n, i + pt, j + pl) of the
(N, H + pt + pb, W + pl + pr) image) and zeroes the border, the uint8 form of 0 the copy would have
written (z = 0: an unsigned input). The reader then reads that buffer in place, as the copy.

The planner decides at the reader (request(): its padding, the producer's kind, one reader), after the
producer's step exists: the value's stored shape grows by the padding (layout.Value.pad) and
Planner.out_pads tells the producer's bind, which runs once planning is over, to write it padded.
Values are the reference's: only where they are stored differs. Whether a reader reads its input in
place at all (reads_in_place: unsigned, unpadded, whole 4-byte runs) is decided here too.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit

from .calls import call
from .kargs import V_CG, V_KH, V_KW, V_OH, V_OW, V_SEG4, V_USEG, V_VSEG
from .layout import NHWC, Value


def reads_in_place(dtype, gm: dict, geo: np.ndarray, gemv_max_rows: int) -> bool:
    """Whether vnni.conv_vnni reads the stored input itself as its padded uint8 input (no to_padded_u8
    copy): a uint8 input (z = 0, so x + z is x), no padding, and runs that are whole 4-byte reads
    (none reads past the buffer's end, which has no SLACK). Not for a conv of at most
    gemv_max_rows (Tuning's) pixels a sample, which the whole-plan runner gives the one-pixel kernel
    (it takes the padded_conv_vnni call)."""
    return (np.dtype(dtype) == np.uint8 and gm["pt"] == gm["pb"] == gm["pl"] == gm["pr"] == 0
            and int(geo[V_SEG4]) * 4 * int(geo[V_USEG]) * int(geo[V_VSEG]) == int(geo[V_KH]) * int(geo[V_KW]) * int(geo[V_CG])
            and gm["oh"] * gm["ow"] > gemv_max_rows)


def request(p, x_name: str, gm: dict, in_place_but_pads) -> bool:
    """Whether the reader of `x_name` (geometry gm) reads it padded in place: asks its producer to write
    it so (p.out_pads) where the producer is a plain direct VNNI conv (p.paddable), x_name has this one
    reader, is no graph output, is stored uint8 channels-last, and the reader would read it in place but
    for its padding (in_place_but_pads)."""
    pads = (gm["pt"], gm["pl"], gm["pb"], gm["pr"])
    v = p.values.get(x_name)
    if (not any(pads) or x_name not in p.paddable or p.uses[x_name] != 1 or x_name in p.graph.outputs or v is None
            or v.layout != NHWC or v.dtype != np.uint8 or v.pad is not None or not in_place_but_pads):
        return False
    padded = replace(v, pad=pads)
    p.values[x_name] = padded
    for step in p.steps:
        if step.output == x_name:
            step.value = padded
    p.out_pads[x_name] = pads
    return True


def stored_input(p, x_name: str, x4shape: tuple) -> tuple:
    """The reader's input (h, w, c) as stored: with the border its producer writes around it."""
    pad = p.out_pads.get(x_name)
    if pad is None:
        return x4shape
    return (x4shape[0] + pad[0] + pad[2], x4shape[1] + pad[1] + pad[3], x4shape[2])


def padded_output(kc, tuning, p, name: str, out: np.ndarray):
    """The "bind" variant (variants.VARIANTS) of a MAC step writing `name` into `out` where its reader asked
    for it padded: conv_vnni_direct_padded (conv_vnni_direct's arguments, opad = HP, WP, pt, pl in rq's
    place) over the unpadded pixels, after zero_border; else None."""
    pad = p.out_pads.get(name)
    if pad is None:
        return None
    from . import vnni_direct
    n, hp, wp = out.shape[:3]
    args = {k: v for k, v in kc.args.items() if k != "rq"}
    args["opad"] = np.array([hp, wp, pad[0], pad[1]], np.int64)

    def first(x4):
        src, calls = kc.first(x4)
        return src, calls + [call(zero_border, out, *pad)]
    return replace(kc, kern=vnni_direct.conv_vnni_direct_padded, args=args, first=first,
                   pixels=n * int(kc.geo[V_OH]) * int(kc.geo[V_OW]))


def vnni_offset(x: Value) -> int | None:
    """z with x + z in 0..255 for every value of x: 128 for int8, 0 for a tensor proven in 0..255 (an
    unsigned activation, stored int16); None when the VNNI kernel cannot read x as uint8."""
    if x.dtype == np.int8:
        return 128
    return 0 if 0 <= x.lo and x.hi <= 255 else None


@njit(cache=True, nogil=True)
def zero_border(out, pt, pl, pb, pr):
    """out: (N, HP, WP, C) uint8; rows < pt or >= HP - pb, and columns < pl or >= WP - pr, set to 0."""
    n, hp, wp, c = out.shape
    for b in range(n):
        for y in range(hp):
            row = out[b, y]
            if y < pt or y >= hp - pb:
                for x in range(wp):
                    for ch in range(c):
                        row[x, ch] = 0
                continue
            for x in range(pl):
                for ch in range(c):
                    row[x, ch] = 0
            for x in range(wp - pr, wp):
                for ch in range(c):
                    row[x, ch] = 0
