"""Progress on the terminal for every step that can take more than a few seconds: a tqdm bar where the work
counts itself (calibration nodes, evaluation chunks), an elapsed-time ticker where it cannot (one call into the
quantizer, the verifier, numba). Both draw on stderr only when it is a terminal (tqdm's disable=None), so a log
or a captured stream gets no frames; `enabled=False` silences them everywhere (callers that run conversions in
a loop, tests)."""
from __future__ import annotations

import threading
from contextlib import contextmanager

from tqdm.auto import tqdm

TICK_S = 0.5  # how often a ticker redraws its elapsed time


def bar(iterable=None, *, total: int | None = None, desc: str = "", unit: str = "it", enabled: bool = True):
    """tqdm, drawn only on a terminal, gone when done (the command's own summary line stays)."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True,
                disable=None if enabled else True)


@contextmanager
def ticker(desc: str, enabled: bool = True):
    """`desc: 12s`, redrawn every TICK_S while the block runs: movement for work that cannot count itself."""
    line = tqdm(total=None, desc=desc, bar_format="{desc}: {elapsed}", leave=False, disable=None if enabled else True)
    stop = threading.Event()

    def tick():
        while not stop.wait(TICK_S):
            line.refresh()

    thread = None if line.disable else threading.Thread(target=tick, daemon=True)
    if thread:
        thread.start()
    try:
        yield line
    finally:
        stop.set()
        if thread:
            thread.join()
        line.close()
