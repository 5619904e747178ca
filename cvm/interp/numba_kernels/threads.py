"""Parallel kernel calls on persistent Python threads.

Every compiled kernel releases the GIL (nogil=True) and takes the range of output rows to compute,
so a parallel call is the same kernel run on disjoint row ranges. The rows are cut into a few chunks
per thread that the caller's thread and the pool threads take in turn from one shared iterator: a
thread the OS does not schedule (a shared machine) delays at most one chunk, the others take the
rest. Splitting only ever divides outputs, never a sum. Python threads
rather than numba's parallel regions: no second compiled variant of every kernel (cold start), and
blocking waits instead of spinning workers when the machine is oversubscribed.

The threads belong to the process, not to a runner (EXECUTORS): every Pool of one thread count
submits to one shared executor. A runner then owns no thread, so a dropped model leaves none
behind whoever still holds its plan, and the threads alive are bounded by the thread counts in
use, not by the models loaded (a node keeps 32). Sharing is safe because no task on the shared
threads ever waits for another task (a part runs its ops unsplit; a chunk is one kernel call):
only callers wait, and a caller cancels what is still queued once it has drained the work itself.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from .calls import Call, call, record_type
from .tuning import DEFAULT_TUNING


def default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """n items into `parts` contiguous ranges of nearly equal size (no empty range)."""
    parts = max(1, min(parts, n))
    return [(i * n // parts, (i + 1) * n // parts) for i in range(parts)]


class _Executors:
    """One executor for each worker count, shared by every Pool of that count in the process. A
    forked child starts with none (the parent's threads do not exist there)."""

    def __init__(self):
        self._reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._by_workers: dict[int, ThreadPoolExecutor] = {}

    def get(self, workers: int) -> ThreadPoolExecutor:
        ex = self._by_workers.get(workers)  # (a dict read: no lock once made)
        if ex is None:
            with self._lock:
                ex = self._by_workers.get(workers)
                if ex is None:
                    ex = ThreadPoolExecutor(workers, thread_name_prefix=f"cvm-numba-{workers}")
                    self._by_workers[workers] = ex
        return ex


EXECUTORS = _Executors()


class Pool:
    """threads: how many threads share a call (the caller's and threads - 1 of EXECUTORS'); eager:
    split every call with enough rows, however small (tests use it to run the parallel path on small
    shapes); chunks: a split call's rows are cut into this many chunks a thread (Tuning.chunks_per_thread)."""

    def __init__(self, threads: int, eager: bool = False, chunks: int = DEFAULT_TUNING.chunks_per_thread):
        self.threads, self.eager, self.chunks = threads, eager, chunks
        self._local = threading.local()  # .serial: this thread runs a part of a batch, ops unsplit

    def _get(self) -> ThreadPoolExecutor:
        return EXECUTORS.get(self.threads - 1)

    def call(self, fn, args: tuple, n: int, min_per_thread: int = 1) -> Call:
        """The Call running fn(*args, lo, hi) over 0..n (lo, hi: fn's last two parameters), split between
        threads when worth it: fn's own, or _run's (fn; args as fn's record; ranges; parts)."""
        parts = min(self.threads, n if self.eager else n // max(1, min_per_thread))
        if parts <= 1:
            return call(fn, *args, 0, n)
        return call(self._run, fn, record_type(fn, len(args))(*args), split(n, min(n, parts * self.chunks)), parts)

    def run_parts(self, fn, n: int) -> list:
        """[fn(0), ..., fn(n - 1)], the parts taken in turn by the caller's thread and the pool
        threads from one shared iterator; inside a part, every split call runs on its own thread
        (the threads are already busy with the other parts, and a pool thread must never wait for
        work queued behind itself)."""
        results = [None] * n
        parts = iter(range(n))

        def work():
            self._local.serial = True
            try:
                for k in parts:
                    results[k] = fn(k)
            finally:
                self._local.serial = False
        futures = [self._get().submit(work) for _ in range(min(self.threads, n) - 1)]
        try:
            work()
        finally:
            _finish(futures)
        return results

    def _run(self, fn, args, ranges, parts):
        if getattr(self._local, "serial", False):
            _drain(fn, args, iter(ranges))
            return
        chunks = iter(ranges)  # next() on a list iterator is atomic under the GIL
        ex = self._get()
        futures = [ex.submit(_drain, fn, args, chunks) for _ in range(parts - 1)]
        try:
            _drain(fn, args, chunks)
        finally:
            _finish(futures)


def _drain(fn, args, chunks):
    for lo, hi in chunks:
        fn(*args, lo, hi)


def _finish(futures) -> None:
    """Waits for the tasks that started; those still queued are cancelled: the caller drained the
    shared iterator, so they would find nothing left, and a call must not wait behind another
    runner's work queued on the shared threads."""
    for f in futures:
        if not f.cancel():
            f.result()
