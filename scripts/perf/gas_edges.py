"""Edge shapes of the conv kernels under gas schedule v2: thin convs, strided and wide depthwise convs,
grouped convs, 16/32-bit inputs, transposed convs: each built in opset 3, run on the reference path
(numba portable kernels, one thread, thread CPU, median of 15 calls) and printed with the rate its call
gas pays (Mgas/s; the anchor is 60), as measured and at the reference machine's speed (scaled by the
calibration's baseline probe timed here, as gas_report.py --time does). A check beside the
calibration's probes, not part of it.

    python scripts/perf/gas_edges.py
"""
import time

import numpy as np

import cvm
from cvm.gas import call_gas
from cvm.interp import numba as nb


SCALE = 1.0  # reference baseline / the baseline here (main sets it)


def rate(name, cin, cout, hw, k=1, groups=1, stride=1, bits=8, batch=1, op="conv2d"):
    """Time one conv2d (or conv_transpose2d, op="convT") of opset 3 and print the rate its call pays."""
    b = cvm.GraphBuilder(opset=3)
    x = b.input("x", (cin, hw, hw), bits)
    rng = np.random.default_rng(0)
    if op == "conv2d":
        w = rng.integers(-1, 2, (cout, cin // groups, k, k))
        y = b.op("conv2d", x, b.const(w), groups=groups, strides=(stride, stride), pads=(k // 2,) * 4)
    else:
        w = rng.integers(-1, 2, (cin, cout // groups, k, k))
        y = b.op("conv_transpose2d", x, b.const(w), groups=groups, strides=(stride, stride))
    m = b.build(y)
    r = nb.prepare(m.graph, m.analysis, isa="portable", threads=1,
                   wholeplan="never")  # the per-step path: the slowest, which v2 is priced on
    mx = (1 << (bits - 1)) - 1
    f = {"x": rng.integers(-mx, mx + 1, (batch, cin, hw, hw)).astype(m.inputs[0].dtype)}
    r(f)
    ts = []
    for _ in range(15):
        s = time.thread_time()
        r(f)
        ts.append(time.thread_time() - s)
    t = np.median(ts)
    g = call_gas(m, batch)
    print(f"{name:<40} {t * 1e3:8.3f} ms  call gas {g:>10,}  {g / t / 1e6:6.0f} Mgas/s here, "
          f"{g / (t * SCALE) / 1e6:6.0f} at reference speed")


def main() -> None:
    global SCALE
    from gas_calibration import REFERENCE_BASELINE_S
    from gas_report import baseline_seconds
    here = baseline_seconds()
    SCALE = REFERENCE_BASELINE_S / here
    print(f"baseline probe here {here * 1e6:.1f} us (reference {REFERENCE_BASELINE_S * 1e6:.1f} us)")
    rate("dw C1 s2 3x3 512", 1, 1, 512, 3, 1, 2)
    rate("dw C64 s2 3x3 128", 64, 64, 128, 3, 64, 2)
    rate("dw C8 s1 3x3 256", 8, 8, 256, 3, 8, 1)
    rate("dw C300 s1 3x3 32", 300, 300, 32, 3, 300, 1)
    rate("thin 2->1 1x1 256", 2, 1, 256)
    rate("thin 1->2 s2 3x3 512", 1, 2, 512, 3, 1, 2)
    rate("grouped og1 cg2 G128 16x16", 256, 128, 16, 1, 128)
    rate("16bit thin 1->2 256", 1, 2, 256, 1, 1, 1, 16)
    rate("32bit thin 1->2 128 ", 1, 2, 128, 1, 1, 1, 32)
    rate("thin 1->2 256 batch 8", 1, 2, 256, 1, 1, 1, 8, 8)
    rate("convT 1->1 s4 k4 64", 1, 1, 64, 4, 1, 4, op="convT")
    rate("convT dw G32 s2 k2 32", 32, 32, 32, 2, 32, 2, op="convT")


if __name__ == "__main__":
    main()
