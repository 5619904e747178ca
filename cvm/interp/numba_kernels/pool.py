"""max_pool2d on channels-last (N, H, W, C) arrays; taps in the padding are never visited (conv.tap_range
gives each window's in-image taps, so a 2^20-tap window over two rows loops twice, not 2^20 times; never
none of them: the verifier proved every window holds at least one input tap)."""
from __future__ import annotations

from numba import njit

from .conv import tap_range
from .kargs import DH, DW, KH, KW, PL, PT, SH, SW


@njit(cache=True, nogil=True)
def max_pool_nhwc(x, out, geo, r0, r1):
    """Output rows r0..r1, a row being (n, i) = divmod(row, OH). geo: kargs.WINDOW."""
    kh, kw, sh, sw, dh, dw, pt, pl = geo[KH], geo[KW], geo[SH], geo[SW], geo[DH], geo[DW], geo[PT], geo[PL]
    _, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for r in range(r0, r1):
        n, i = r // oh, r % oh
        ulo, uhi = tap_range(i, sh, dh, pt, h, kh)
        for j in range(ow):
            vlo, vhi = tap_range(j, sw, dw, pl, w, kw)
            first = True
            for u in range(ulo, uhi):
                y = i * sh + u * dh - pt
                for v in range(vlo, vhi):
                    z = j * sw + v * dw - pl
                    if first:
                        for ch in range(c):
                            out[n, i, j, ch] = x[n, y, z, ch]
                        first = False
                    else:
                        for ch in range(c):
                            out[n, i, j, ch] = max(out[n, i, j, ch], x[n, y, z, ch])
