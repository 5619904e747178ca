"""The numba backend's threads belong to the process, not to a model (issue 28, finding a): loading
and dropping many models, each run with its calls split between threads, leaves the thread count
where it was; models kept alive together share the same threads."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np

import cvm
from cvm.interp import numba as nb
from cvm.ir import Graph, Input, Node

MODELS = 1000
THREADS = 2  # a dense's rows split between the caller and one pool thread (split="always")


def _model_bytes() -> bytes:
    """A dense small enough to load a thousand times, which pool.call splits when eager."""
    w = np.ones((4, 8), np.int8)
    return cvm.Model(Graph([Input("x", (8,), 8)], {"w": w}, [Node("dense", ("x", "w"), "y")], ["y"])).to_bytes()


def _run_split(model: cvm.Model, x: np.ndarray):
    runner = nb.prepare(model.graph, model.analysis, threads=THREADS, split="always")
    runner({"x": x})
    return runner


def _settled_count(want: int, seconds: float = 5.0) -> int:
    """threading.active_count() once it is at most `want`, or when `seconds` have passed."""
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        n = threading.active_count()
        if n <= want or time.monotonic() > deadline:
            return n
        time.sleep(0.05)


def test_dropped_models_leave_no_threads():
    data, x = _model_bytes(), np.arange(16, dtype=np.int8).reshape(2, 8)
    _run_split(cvm.loads(data), x)  # the process's pool threads for this count, made once
    start = _settled_count(0, seconds=0.5)
    for _ in range(MODELS):
        _run_split(cvm.loads(data), x)
    assert _settled_count(start) <= start


def test_live_models_share_the_threads():
    data, x = _model_bytes(), np.arange(16, dtype=np.int8).reshape(2, 8)
    _run_split(cvm.loads(data), x)
    start = _settled_count(0, seconds=0.5)
    runners = [_run_split(cvm.loads(data), x) for _ in range(50)]
    assert threading.active_count() <= start
    del runners


def test_dropped_runners_hot_sets_are_released_by_the_next_runner():
    """A runner that only ever uses its own reserved set never hands one back through give(), which was
    the only place collected runners' sets were purged: their buffers stayed counted and alive."""
    model = cvm.loads(_model_bytes())
    x = np.ones((1, 8), np.int8)
    gc.collect()
    before = nb.IDLE_SETS.held_bytes()  # what other tests' live runners hold in this process (purged)
    for _ in range(50):
        nb.prepare(model.graph, model.analysis, threads=1)({"x": x})
    gc.collect()
    survivor = nb.prepare(model.graph, model.analysis, threads=1)
    survivor({"x": x})
    counted = nb.IDLE_SETS.nbytes - before  # read before held_bytes(), which purges by itself
    assert counted == survivor.cached_bytes() > 0
