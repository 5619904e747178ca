"""The numba backend: the graph lowered once to a plan of compiled kernel calls (cvm.interp.numba_kernels),
bound to preallocated buffers per batch size, held bit for bit to the reference interpreter.

    runner = prepare(graph, analysis)            # isa="auto" | "vnni" | "portable"
    outputs = runner({"x": x_int8})              # same dtypes and values as the reference

A call takes a buffer set of its batch size for itself and gives it back when done, so a runner (whose
plan is shared) may be called from several threads at once. With several threads, a large enough
batch is cut into parts that the threads run whole, each through every op (no synchronisation per
op; samples are independent in CVM); smaller batches split each large op's output rows instead. Idle sets are kept for reuse in one cache
for the whole process (every runner, every thread), bounded in bytes (Tuning.max_bound_bytes).
Every measured choice (kernel variants, thresholds, budgets) comes from one frozen Tuning record that
prepare() passes down (numba_kernels/tuning.py).
"""
from __future__ import annotations

import itertools
import threading
import weakref
from collections import Counter, OrderedDict

import numpy as np
from numba.core.dispatcher import Dispatcher

from ..ir import Graph
from ..ops import by_opset, derive
from ..verify import Analysis
from .numba_kernels import buffers, lower_mac, lower_ops, lower_text, lower_vision, plan, wholeplan
from .numba_kernels import threads as threads_
from .numba_kernels.calls import as_call
from .numba_kernels.layout import canonical
from .numba_kernels.simd import host_has_vnni  # (and here: cvm.interp.numba.host_has_vnni)
from .numba_kernels.tuning import DEFAULT_TUNING, Tuning

LOWERINGS_V1 = {
    "conv2d": lower_mac.lower_conv, "dense": lower_mac.lower_dense, "matmul": lower_ops.lower_matmul,
    "add": lower_ops.lower_binary, "sub": lower_ops.lower_binary, "mul": lower_ops.lower_binary,
    "div": lower_ops.lower_binary, "relu": lower_ops.lower_clamp, "clip": lower_ops.lower_clamp,
    "requant": lower_ops.lower_requant, "lut": lower_ops.lower_lut, "max_pool2d": lower_ops.lower_max_pool,
    "sum": lower_ops.lower_reduce, "max": lower_ops.lower_reduce, "reshape": lower_ops.lower_reshape,
    "flatten": lower_ops.lower_reshape, "transpose": lower_ops.lower_transpose, "concat": lower_ops.lower_concat,
    "pad": lower_ops.lower_pad, "slice": lower_ops.lower_slice,
}
LOWERINGS_V2 = derive(LOWERINGS_V1, {"resize2d": lower_vision.lower_resize,  # opset 2 (cvm.ops.vision)
                                     "conv_transpose2d": lower_vision.lower_conv_transpose,
                                     "gather": lower_text.lower_gather, "isqrt": lower_text.lower_isqrt})  # (text)
LOWERINGS = by_opset({1: LOWERINGS_V1, 2: LOWERINGS_V2})  # (opset, op) -> lowering(planner, index, node, attrs)
REFUSED: dict[tuple[int, str], str] = {}  # (opset, op) -> why this backend does not run it
ISAS = ("auto", "vnni", "portable")
SPLITS = ("auto", "always", "batch", "ops")
WHOLEPLANS = ("auto", "always", "never")


def available_isas() -> list[str]:
    """Every kernel path this machine can run (the tests hold each one to the reference)."""
    return ["portable"] + (["vnni"] if host_has_vnni() else [])


class _Bound:
    """One batch size's buffers and the prebuilt kernel calls (the planner's Tuning: p.tuning)."""

    def __init__(self, p: plan.Planner, outputs: dict[str, str], batch: int, whole: str = "auto"):
        env = {name: np.empty((batch,) + p.values[name].stored, p.values[name].dtype) for name in
               (i.name for i in p.graph.inputs)}
        self.inputs = [(name, env[name]) for name in env]
        pooled, pool_bytes = buffers.pack(p.steps, env, outputs.values(), batch, p.tuning)  # (liveness)
        self.nbytes = sum(a.nbytes for a in env.values()) + pool_bytes
        calls, spans, viewed = [], [], set()  # spans: (value, its step's calls); viewed: values views read
        for step in p.steps:
            ins = [env[n] for n in step.inputs]
            if (v := step.bound_view(ins)) is not None:
                env[step.output] = v
                viewed.update(step.inputs)
                continue
            out = pooled[step.output]
            self.nbytes += batch * step.scratch
            lo = len(calls)
            calls.extend(map(as_call, step.bind(ins, out)))
            spans.append((step.output, range(lo, len(calls))))
            env[step.output] = out
        self.outputs = [(name, canonical(env[stored], p.values[stored])) for name, stored in outputs.items()]
        self.segments = None  # compiled calls a run makes when the whole-plan runner took this set
        if use_wholeplan(whole, calls, self.nbytes, p.tuning) and (w := wholeplan.bind(
                calls, self.inputs, self.outputs, _solo(p.steps, spans, viewed | set(outputs.values())), p.tuning)):
            calls, self.inputs, self.outputs, self.nbytes, self.segments = w.calls, w.inputs, w.outputs, w.nbytes, w.segments
            self.steps = w.funcs  # (the compiled steps its program calls by address: kept alive with it)
        self.calls = [_direct(fn, args) for fn, args in calls]


def _solo(steps, spans, shared: set) -> list:
    """Per call, (its step's number, whether one step reads its value: not a view, not an output)."""
    readers = Counter(n for step in steps for n in set(step.inputs))
    return [(i, readers[name] == 1 and name not in shared) for i, (name, ks) in enumerate(spans) for _ in ks]


def use_wholeplan(whole: str, calls: list, nbytes: int, tuning: Tuning) -> bool:
    """Whether a bound set runs as one compiled program (numba_kernels.wholeplan): "always",
    "never", or "auto": up to tuning.wholeplan_max_bytes (the program saves the per-call cost of every
    kernel and measured faster on every fixture and ImageNet model)."""
    if whole != "auto":
        return whole == "always"
    return bool(calls) and nbytes <= tuning.wholeplan_max_bytes


def _direct(fn, args):
    """(fn, args) as a run makes the call: a numba kernel replaced by its compiled entry point for these
    very arguments (the buffers are bound once, so their types never change): a call then skips the
    dispatcher's type matching, about a third of a small kernel's call overhead (0.32 -> 0.2 us measured);
    args, the kernel's named record (calls.Call), as a plain tuple (fn(*args) copies a tuple subclass)."""
    if isinstance(fn, Dispatcher):
        return fn.compile(tuple(fn.typeof_pyval(a) for a in args)), tuple(args)
    return fn, tuple(args)


class _IdleSets:
    """The buffer sets no call is using, kept for the next call of the same runner and batch size:
    one cache for the process, least recently returned dropped first, within the budget (Tuning's
    max_bound_bytes and max_bound_sets) of the runner that returns or reserves a set. A set larger than
    the whole budget serves its call and is not kept. Sets in use
    are not here: each belongs to one running call (so two threads never share buffers), and is
    bounded by the run's activations (MAX_RUN_BYTES) plus the scratch that the planner admits."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sets: OrderedDict[int, tuple[tuple[int, int], _Bound]] = OrderedDict()  # serial -> (key, set)
        self._by_key: dict[tuple[int, int], list[int]] = {}  # (runner, batch) -> serials, newest last
        self._serial = itertools.count()
        self._dead: list[int] = []  # collected runners whose sets are still here
        self._hot: dict[int, tuple[int, list, int]] = {}  # runner -> (bytes, its slot, id of the set): reserve()
        self.nbytes = 0

    def take(self, key: tuple[int, int]) -> _Bound | None:
        with self._lock:
            serials = self._by_key.get(key)
            if not serials:
                return None
            _, b = self._sets.pop(serials.pop())
            self.nbytes -= b.nbytes
            return b

    def give(self, key: tuple[int, int], b: _Bound, t: Tuning) -> None:
        if b.nbytes > t.max_bound_bytes:
            return
        with self._lock:
            serial = next(self._serial)
            self._sets[serial] = (key, b)
            self._by_key.setdefault(key, []).append(serial)
            self.nbytes += b.nbytes
            if self._dead:
                self._purge()
            self._evict(0, t)

    def _evict(self, room: int, t: Tuning) -> None:
        """Drops the least recently returned sets until `room` more bytes fit in t's budget, then, if that is
        not enough (a runner of a smaller budget than others'), revokes hot sets: their slots are emptied, so
        the memory goes with the runner's next call, and a set a call holds then goes back through give()."""
        while self._sets and (self.nbytes + room > t.max_bound_bytes or len(self._sets) > t.max_bound_sets):
            self._forget(*self._sets.popitem(last=False))
        while self._hot and self.nbytes + room > t.max_bound_bytes:
            _, (n, slot, _) = self._hot.popitem()
            self.nbytes -= n
            slot.clear()

    def reserve(self, runner: int, b: _Bound, slot: list, t: Tuning) -> bool:
        """Counts b in the budget as `runner`'s hot set, which the runner then takes and returns
        without this lock; False when it already has one, b is over t.hot_max_bytes or cannot fit."""
        with self._lock:
            if self._dead:  # a collected runner's hot set goes before a new one is counted (no give() may come)
                self._purge()
            if runner in self._hot or b.nbytes > t.hot_max_bytes or b.nbytes > t.max_bound_bytes:
                return False
            self._evict(b.nbytes, t)
            self._hot[runner] = (b.nbytes, slot, id(b))
            self.nbytes += b.nbytes
            return True

    def is_hot(self, runner: int, b: _Bound) -> bool:
        """Whether b is still `runner`'s reserved hot set (no lock: one dict read)."""
        entry = self._hot.get(runner)
        return entry is not None and entry[2] == id(b)

    def unreserve(self, runner: int) -> None:
        with self._lock:
            self.nbytes -= self._hot.pop(runner, (0,))[0]

    def _forget(self, serial: int, entry: tuple[tuple[int, int], _Bound]) -> None:
        key, b = entry
        self.nbytes -= b.nbytes
        serials = self._by_key[key]
        serials.remove(serial)
        if not serials:
            del self._by_key[key]

    def drop(self, runner: int) -> None:
        """A runner was garbage collected: its sets go at the next give(). Takes no lock (the
        collector may run this in any thread, inside any allocation, also one under the lock)."""
        self._dead.append(runner)

    def _purge(self) -> None:
        while self._dead:
            runner = self._dead.pop()
            self.nbytes -= self._hot.pop(runner, (0,))[0]
            for serial in [s for s, (key, _) in self._sets.items() if key[0] == runner]:
                self._forget(serial, self._sets.pop(serial))

    def held_bytes(self, runner: int | None = None) -> int:
        """Bytes of the idle sets: all of them, or one runner's."""
        with self._lock:
            self._purge()
            hot = sum(n for r, (n, _, _) in self._hot.items() if runner is None or r == runner)
            return hot + sum(b.nbytes for key, b in self._sets.values() if runner is None or key[0] == runner)


IDLE_SETS = _IdleSets()
_RUNNER_IDS = itertools.count()


class Runner:
    def __init__(self, graph: Graph, analysis: Analysis, isa: str = "auto", threads: int | None = None,
                 split: str = "auto", wholeplan: str = "auto", tuning: Tuning = DEFAULT_TUNING):
        if isa not in ISAS:
            raise ValueError(f"unknown isa {isa!r}; choose from {ISAS}")
        if isa == "auto":
            isa = "vnni" if host_has_vnni() else "portable"
        elif isa == "vnni" and not host_has_vnni():
            raise ValueError("this CPU (or numba's target CPU) has no AVX-512 VNNI")
        self.isa = isa
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.split = split
        if wholeplan not in WHOLEPLANS:
            raise ValueError(f"wholeplan must be one of {WHOLEPLANS}, got {wholeplan!r}")
        self.wholeplan = wholeplan
        if not isinstance(tuning, Tuning):
            raise TypeError(f"tuning must be a numba_kernels.tuning.Tuning, got {type(tuning).__name__}")
        self.tuning = tuning
        self.pool = threads_.Pool(threads or threads_.default_threads(), split == "always", tuning.chunks_per_thread)
        self.plan, self.outputs = plan.build(graph, analysis, isa, self.pool, LOWERINGS, REFUSED, tuning)
        self._id = next(_RUNNER_IDS)
        self._hot: list[tuple[int, _Bound]] = []  # (batch, set): the reserved set while no call holds it
        weakref.finalize(self, IDLE_SETS.drop, self._id)

    def cached_bytes(self) -> int:
        """Bytes of this runner's idle buffer sets (IDLE_SETS.held_bytes(): all runners')."""
        return IDLE_SETS.held_bytes(self._id)

    def batch_parts(self, batch: int) -> int:
        """How many parts a batch is cut into (1: not cut; each op splits its own rows)."""
        t = self.pool.threads
        if t == 1 or batch < 2 or self.split in ("always", "ops"):
            return 1
        if self.split == "batch":
            return min(batch, t + 1)  # (tests: more parts than threads, of unequal sizes)
        if batch < 2 * t:
            return 1
        return t * max(1, min(self.tuning.max_parts_per_thread, batch // (self.tuning.batch_part_min * t)))

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        batch = next(iter(inputs.values())).shape[0]
        parts = self.batch_parts(batch)
        if parts == 1:
            return self._run(inputs, batch)
        ranges = threads_.split(batch, parts)

        def part(k):
            lo, hi = ranges[k]
            return self._run({name: x[lo:hi] for name, x in inputs.items()}, hi - lo)
        outs = self.pool.run_parts(part, len(ranges))
        return {name: np.concatenate([o[name] for o in outs]) for name in outs[0]}

    def _run(self, inputs: dict[str, np.ndarray], batch: int) -> dict[str, np.ndarray]:
        b = self._take(batch)
        try:
            for name, buf in b.inputs:
                buf[...] = inputs[name]  # (unsafe casting, as np.copyto's; 0.2 us less a call)
            for fn, args in b.calls:
                fn(*args)
            return {name: out.copy() for name, out in b.outputs}
        finally:
            self._give(batch, b)

    def _take(self, batch: int) -> _Bound:
        """A set for one call: the hot slot's (list.pop: one thread gets it), else the cache's."""
        if self._hot:
            try:
                hot_batch, b = self._hot.pop()
            except IndexError:  # another thread took it
                pass
            else:
                if hot_batch == batch:
                    return b
                IDLE_SETS.unreserve(self._id)  # (another batch size now: the set goes back to the cache)
                IDLE_SETS.give((self._id, hot_batch), b, self.tuning)
        return IDLE_SETS.take((self._id, batch)) or _Bound(self.plan, self.outputs, batch, self.wholeplan)

    def _give(self, batch: int, b: _Bound) -> None:
        """Back to the hot slot while it is still reserved and the cache within its budget (no lock);
        else through the cache, whose give() evicts (and revokes hot sets) down to the budget."""
        if IDLE_SETS.is_hot(self._id, b):
            if IDLE_SETS.nbytes <= self.tuning.max_bound_bytes:
                self._hot.append((batch, b))
                return
            IDLE_SETS.unreserve(self._id)  # (runners of larger budgets filled the cache past ours)
        elif IDLE_SETS.reserve(self._id, b, self._hot, self.tuning):
            self._hot.append((batch, b))
            return
        IDLE_SETS.give((self._id, batch), b, self.tuning)

    def wholeplan_segments(self, batch: int) -> int | None:
        """Compiled calls a run of this batch size makes as a whole-plan program (1: every kernel in
        one call), or None when it takes the per-step path."""
        b = self._take(batch)
        self._give(batch, b)
        return b.segments

    def describe(self) -> str:
        """The plan, one step a line (fused chains and the kernel path of each MAC show in brackets)."""
        return "\n".join(map(str, self.plan.steps))


def prepare(graph: Graph, analysis: Analysis, isa: str = "auto", threads: int | None = None,
            split: str = "auto", wholeplan: str = "auto", tuning: Tuning = DEFAULT_TUNING) -> Runner:
    """Backend protocol: plan once (kernels compile on first use, or load from numba's cache).
    threads: how many threads share a call (default: the CPUs this process may run on);
    split: "auto" cuts batches of at least 2 * threads samples into parts run whole by the threads,
    and splits the large ops of smaller batches; "ops" never cuts the batch; "always" splits every
    op with enough rows, however small, and "batch" cuts every batch of 2 or more (both for tests);
    wholeplan: "auto" runs a bound set of small calls as one compiled program (use_wholeplan),
    "always" every set it can, "never" none (both for tests and measurements);
    tuning: every measured choice among kernels, thresholds and budgets (numba_kernels.tuning.Tuning;
    any value gives the reference's outputs bit for bit)."""
    return Runner(graph, analysis, isa, threads, split, wholeplan, tuning)
