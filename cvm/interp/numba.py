"""The numba backend: the graph lowered once to a plan of compiled kernel calls (cvm.interp.numba_kernels),
bound to preallocated buffers per batch size, held bit for bit to the reference interpreter.

    runner = prepare(graph, analysis)            # isa="auto" | "vnni" | "portable"
    outputs = runner({"x": x_int8})              # same dtypes and values as the reference

Buffers are per thread, so a runner may be called from several threads at once.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from ..ir import Graph
from ..verify import Analysis
from .numba_kernels import lower_mac, lower_ops, plan
from .numba_kernels import threads as threads_
from .numba_kernels.layout import canonical

LOWERINGS = {
    "conv2d": lower_mac.lower_conv, "dense": lower_mac.lower_dense, "matmul": lower_ops.lower_matmul,
    "add": lower_ops.lower_binary, "sub": lower_ops.lower_binary, "mul": lower_ops.lower_binary,
    "div": lower_ops.lower_binary, "relu": lower_ops.lower_clamp, "clip": lower_ops.lower_clamp,
    "requant": lower_ops.lower_requant, "lut": lower_ops.lower_lut, "max_pool2d": lower_ops.lower_max_pool,
    "sum": lower_ops.lower_reduce, "max": lower_ops.lower_reduce, "reshape": lower_ops.lower_reshape,
    "flatten": lower_ops.lower_reshape, "transpose": lower_ops.lower_transpose, "concat": lower_ops.lower_concat,
    "pad": lower_ops.lower_pad, "slice": lower_ops.lower_slice,
}
ISAS = ("auto", "vnni", "portable")
MAX_BOUND_BATCHES = 4  # buffer sets kept per thread
MAX_BOUND_BYTES = 1 << 30  # bytes of buffer sets kept per thread; a larger set serves its call and is dropped


def host_has_vnni() -> bool:
    """AVX-512 VNNI usable: the CPU has it and numba compiles for this CPU (not a generic target,
    not NUMBA_DISABLE_JIT, where the intrinsics cannot run)."""
    import llvmlite.binding as ll
    from numba.core import config
    if config.DISABLE_JIT or config.CPU_NAME not in (None, "host"):
        return False
    features = ll.get_host_cpu_features()
    return bool(features.get("avx512f") and features.get("avx512vnni"))


def available_isas() -> list[str]:
    """Every kernel path this machine can run (the tests hold each one to the reference)."""
    return ["portable"] + (["vnni"] if host_has_vnni() else [])


class _Bound:
    """One batch size's buffers and the prebuilt kernel calls."""

    def __init__(self, p: plan.Planner, outputs: dict[str, str], batch: int):
        env = {name: np.empty((batch,) + p.values[name].stored, p.values[name].dtype) for name in
               (i.name for i in p.graph.inputs)}
        self.inputs = [(name, env[name]) for name in env]
        self.nbytes = sum(a.nbytes for a in env.values())
        self.calls = []
        for step in p.steps:
            ins = [env[n] for n in step.inputs]
            if step.view is not None:
                env[step.output] = step.view(ins[0])
                continue
            out = np.empty((batch,) + step.value.stored, step.value.dtype)
            self.nbytes += out.nbytes + batch * step.scratch
            self.calls.extend(step.bind(ins, out))
            env[step.output] = out
        self.outputs = [(name, canonical(env[stored], p.values[stored])) for name, stored in outputs.items()]


class Runner:
    def __init__(self, graph: Graph, analysis: Analysis, isa: str = "auto", threads: int | None = None,
                 split: str = "auto"):
        if isa not in ISAS:
            raise ValueError(f"unknown isa {isa!r}; choose from {ISAS}")
        if isa == "auto":
            isa = "vnni" if host_has_vnni() else "portable"
        elif isa == "vnni" and not host_has_vnni():
            raise ValueError("this CPU (or numba's target CPU) has no AVX-512 VNNI")
        self.isa = isa
        if split not in ("auto", "always"):
            raise ValueError(f"split must be 'auto' or 'always', got {split!r}")
        self.pool = threads_.Pool(threads or threads_.default_threads(), eager=split == "always")
        self.plan, self.outputs = plan.build(graph, analysis, isa, self.pool, LOWERINGS)
        self._local = threading.local()

    def bound(self, batch: int) -> _Bound:
        """The buffers for this batch size: kept per thread, least recently used first out, within
        MAX_BOUND_BATCHES sets and MAX_BOUND_BYTES (a cached model costs a node bounded memory)."""
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = OrderedDict()
        b = cache.get(batch)
        if b is None:
            b = _Bound(self.plan, self.outputs, batch)
            if b.nbytes > MAX_BOUND_BYTES:
                return b
            cache[batch] = b
            while len(cache) > MAX_BOUND_BATCHES or sum(v.nbytes for v in cache.values()) > MAX_BOUND_BYTES:
                cache.popitem(last=False)
        cache.move_to_end(batch)
        return b

    def cached_bytes(self) -> int:
        """Bytes of the buffer sets this thread keeps."""
        return sum(v.nbytes for v in getattr(self._local, "cache", {}).values())

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        batch = next(iter(inputs.values())).shape[0]
        b = self.bound(batch)
        for name, buf in b.inputs:
            np.copyto(buf, inputs[name], casting="unsafe")
        for fn, args in b.calls:
            fn(*args)
        return {name: np.array(out, order="C") for name, out in b.outputs}

    def describe(self) -> str:
        """The plan, one step a line (fused chains and the kernel path of each MAC show in brackets)."""
        return "\n".join(map(str, self.plan.steps))


def prepare(graph: Graph, analysis: Analysis, isa: str = "auto", threads: int | None = None,
            split: str = "auto") -> Runner:
    """Backend protocol: plan once (kernels compile on first use, or load from numba's cache).
    threads: how many threads split a large op's output rows (default: the CPUs this process may
    run on); split="always" splits every op with enough rows, however small (for tests)."""
    return Runner(graph, analysis, isa, threads, split)
