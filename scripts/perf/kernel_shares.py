"""What each kernel kind costs inside one model's whole-plan program: the program is bound once as
is, then once per kernel kind with that kind's calls replaced by an empty kernel of the same
arguments; the difference of the medians (interleaved rounds, one thread, thread CPU) is that kind's
share. Shares overlap a little (an emptied kernel leaves its output unwritten, which changes what the
next ones read), so they need not add up to the whole.

    python scripts/perf/kernel_shares.py MODEL.cvm [--batch 1] [--calls 1000] [--rounds 5]

Only for models whose kernels read nothing as an index unclamped (the recurrent fixtures at batch 1):
a lookup that reads an unwritten buffer may read outside its table. --twice measures the other way,
safe on every model and batch: each call of the kind runs twice (a kernel's output never aliases its
inputs, so the second call rewrites the same values), and the extra time is the kind's share.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))


@njit(cache=True, nogil=True)
def noop(*args):
    """An empty kernel (the generated step imports it from this module by name)."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--twice", action="store_true", help="run each call of the kind twice instead of emptying it")
    a = ap.parse_args()
    import cvm
    import kernel_shares  # this file under its module name, so that the generated steps import noop
    from cvm.interp import numba as nb
    from cvm.interp.numba_kernels import wholeplan_ops
    from cvm.interp.numba_kernels.calls import Call
    model = cvm.load(a.model)
    inp = model.inputs[0]
    lim = (1 << (inp.bits - 1)) - 1
    x = np.random.default_rng(0).integers(-lim, lim + 1, (a.batch,) + tuple(inp.shape[1:])).astype(inp.dtype)
    orig, seen = wholeplan_ops.translate, collections.Counter()

    def emptying(target):
        def translate(c, *tuning):
            out = []
            for t in orig(c, *tuning):
                name = getattr(t.fn, "__name__", str(t.fn))
                seen[name] += 1
                if name != target:
                    out.append(t)
                elif a.twice:
                    out += [t, t]
                else:
                    out.append(Call(kernel_shares.noop, t.args))
            return out
        return translate

    runners = []
    for target in [None]:
        wholeplan_ops.translate = emptying(target)
        r = nb.prepare(model.graph, model.analysis, threads=1)
        r({inp.name: x})
        runners.append(("whole", r))
    kinds = dict(seen)
    for kind in kinds:
        wholeplan_ops.translate = emptying(kind)
        r = nb.prepare(model.graph, model.analysis, threads=1)
        r({inp.name: x})
        runners.append((kind, r))
    wholeplan_ops.translate = orig
    times = collections.defaultdict(list)
    for _ in range(a.rounds):
        for name, r in runners:
            t = time.thread_time()
            for _ in range(a.calls):
                r({inp.name: x})
            times[name].append((time.thread_time() - t) / a.calls * 1e6)
    whole = np.median(times["whole"])
    print(f"{Path(a.model).name} batch {a.batch}: whole run {whole:.1f} us")
    for kind, n in kinds.items():
        share = np.median(times[kind]) - whole if a.twice else whole - np.median(times[kind])
        print(f"   {kind:24s} x{n:4d}  {share:6.1f} us")


if __name__ == "__main__":
    main()
