"""numba == reference on a converted model: random inputs in the input's range, every kernel path
this machine runs (portable, VNNI), outputs compared bit for bit (dtype and values); prints the plan's
step labels by count. For large real models that the hypothesis tests cannot reach.

    python scripts/perf/check_equal.py MODEL.cvm [BATCH]
"""
from __future__ import annotations

import sys
import time
from collections import Counter

import numpy as np


def main(argv=None) -> int:
    import cvm
    from cvm.interp import numba as nb
    from cvm.interp import reference
    argv = sys.argv[1:] if argv is None else argv
    m = cvm.load(argv[0])
    s = m.inputs[0]
    mx = (1 << (s.bits - 1)) - 1
    batch = int(argv[1]) if len(argv) > 1 else 1
    x = np.random.default_rng(1).integers(-mx, mx + 1, (batch,) + tuple(s.shape[1:])).astype(s.dtype)
    t = time.time()
    want = reference.run(m.graph, m.analysis, {s.name: x})
    print(f"reference {time.time() - t:.2f} s")
    for isa in nb.available_isas():
        r = nb.prepare(m.graph, m.analysis, isa=isa, threads=1)
        got = r({s.name: x})
        for k in want:
            if got[k].dtype != want[k].dtype or not np.array_equal(got[k], want[k]):
                print(f"{isa}: output {k} differs from the reference")
                return 1
        print(f"{isa} equal, {len(r.plan.steps)} steps")
    print(Counter(st.label for st in r.plan.steps).most_common(12))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
