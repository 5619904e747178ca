"""Processes the tests start, and the check that none outlives the session (tests/conftest.py).

Each process a test starts runs in a process group of its own, so that stopping it also stops what it
started, and inherits OWNER=<pid of the pytest process>, so that the session can find whatever is
left at its end, orphans and grandchildren included (/proc/<pid>/environ). Waits are for a signal
(a line in a log, a process gone) under a generous overall deadline, never a fixed short timeout:
the suite runs on busy machines too.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import time
from pathlib import Path

OWNER = "CVM_TEST_OWNER"
DEADLINE = 300.0  # seconds: the most any one wait may take on a loaded machine (a signal ends it sooner)
STOP_DEADLINE = 60.0  # seconds for a stopped process to exit before it is killed (loaded machine)
HELPERS = (b"multiprocessing",)  # a pytest process's own helpers (resource tracker): they end with it


def wait_for(predicate, what: str, deadline: float = DEADLINE, interval: float = 0.1):
    """The first true value of predicate(); AssertionError naming `what` after `deadline` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {deadline:.0f} s waiting for {what}")


def wait_for_line(log: Path, pattern: str, deadline: float = DEADLINE, proc: subprocess.Popen | None = None) -> str:
    """The first line of `log` matching the regex `pattern`; fails early if `proc` exits first."""
    rx = re.compile(pattern)

    def found():
        text = log.read_text() if log.exists() else ""
        match = next((line for line in text.splitlines() if rx.search(line)), None)
        if match is None and proc is not None and proc.poll() is not None:
            raise AssertionError(f"{log.name}: exited ({proc.returncode}) before a line matching {pattern!r}:\n{text}")
        return match

    return wait_for(found, f"a line matching {pattern!r} in {log.name}", deadline)


class Processes:
    """The subprocesses of one test (the `processes` fixture): stop_all ends every one, however the
    test ends."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, argv: list[str], log: Path, env: dict | None = None, **kw) -> subprocess.Popen:
        """Starts argv with stdout and stderr to `log` (appended), in a new process group."""
        with open(log, "a") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                                    start_new_session=True, preexec_fn=die_with_parent, **kw)
        self.procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen, sig: int = signal.SIGTERM, deadline: float = STOP_DEADLINE) -> float:
        """Sends `sig` and waits for the exit; kills the group if it is not gone by the deadline.
        Returns the seconds the exit took."""
        t0 = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                kill_group(proc.pid)
                proc.wait()
        kill_group(proc.pid)  # whatever it started
        return time.monotonic() - t0

    def stop_all(self) -> None:
        """Every process at once (one slow one does not delay the others' signal), then waits."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            self.stop(p)


def die_with_parent() -> None:
    """In a child before exec (Popen's preexec_fn): SIGTERM when the process that started it dies, even
    by SIGKILL (Linux prctl PR_SET_PDEATHSIG), so a pytest killed from outside leaves nothing running."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the session check remains
        pass


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def owned_processes(owner: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process carrying OWNER=owner, other than `owner` itself and
    its helpers."""
    marker = f"{OWNER}={owner}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == owner:
            continue
        try:
            if marker not in (entry / "environ").read_bytes() + b"\0":
                continue
            cmd = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or not ours
            continue
        if cmd and not any(h in cmd for h in HELPERS):
            found.append((int(entry.name), cmd.replace(b"\0", b" ").decode(errors="replace").strip()))
    return found
