"""How every long-running process of the project stops: on the first SIGTERM or SIGINT, within
GRACE seconds, whatever it is doing.

    stop = Shutdown().install()        # first thing in main()
    while not stop.is_set():
        step()
        stop.wait(poll)                # every sleep and backoff: returns at once when stopping

Three layers, because one is not enough:

1. The handler raises Stopped (a KeyboardInterrupt) in the main thread, which abandons the current
   step wherever it is: a retry loop, a pending transaction, a model compile once it returns. Every
   step of a node is restartable from its SQLite rows (cvm/chain/jobs.py: each write is one
   transaction), so leaving between any two lines loses nothing.
2. The handler first sets an Event. An exception raised by a signal handler can be swallowed: when
   the signal lands inside a finalizer (`__del__`, a generator closed by the garbage collector)
   Python prints "Exception ignored" and goes on, and a library's broad `except BaseException`
   retry loop eats it. The loops check the event and sleep on it, so they end anyway.
3. A daemon timer ends the process with os._exit GRACE seconds after the signal. A signal handler
   runs only between bytecodes of the main thread, so a long native call (an LLVM compile on a busy
   machine) delays both layers above; SQLite commits are atomic, so even this exit loses nothing.

A second signal while stopping ends the process at once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

log = logging.getLogger("cvm.shutdown")

GRACE = 5.0  # seconds from the first signal to the forced exit
SIGNALS = (signal.SIGTERM, signal.SIGINT)
EXIT_FORCED = 128 + signal.SIGTERM  # the status a process killed by SIGTERM reports


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by the first stop signal (a KeyboardInterrupt, so that `except
    Exception` retry handlers let it through and command lines treat it as an interrupt)."""


class Shutdown:
    """One process's stop request: an Event set by SIGTERM/SIGINT, with the forced exit behind it."""

    def __init__(self, grace: float = GRACE):
        self.event = threading.Event()
        self.grace = grace

    def install(self) -> Shutdown:
        """Handles SIGTERM and SIGINT from now on (call it in the main thread, before any slow work)."""
        for s in SIGNALS:
            signal.signal(s, self._on_signal)
        return self

    def is_set(self) -> bool:
        return self.event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleeps up to `seconds`; True (at once) when a stop was asked for."""
        return self.event.wait(seconds)

    def _on_signal(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self.event.is_set():
            log.warning("second %s while stopping: exiting now", name)
            os._exit(EXIT_FORCED)
        self.event.set()
        log.info("%s received: stopping (forced exit in %.0f s)", name, self.grace)
        timer = threading.Timer(self.grace, self._force, (name,))
        timer.daemon = True
        timer.start()
        raise Stopped(name)

    def _force(self, name: str) -> None:
        """Straight to fd 2, not through logging: the stuck main thread may hold a handler's lock."""
        os.write(2, f"still running {self.grace:.0f} s after {name} (in a long native call?): exiting now\n".encode())
        os._exit(EXIT_FORCED)
