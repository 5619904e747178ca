"""Suite-wide: `processes` for tests that start subprocesses, a session check that no process a test
started is still alive at the end (tests/testprocs.py says how they are found), and hypothesis
without its wall-clock limits (a 200 ms deadline per example, the too_slow health check), which
fail property tests on a loaded machine; tests that set their own settings keep them."""

from __future__ import annotations

import os
import signal

import pytest
from testprocs import OWNER, Processes, owned_processes

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # the FHE environment runs tests/fhe without it
    pass
else:
    settings.register_profile("any-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("any-machine")


@pytest.fixture
def processes():
    """Starts subprocesses for one test (Processes.start) and ends them all when it ends."""
    procs = Processes()
    try:
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture(scope="session", autouse=True)
def no_leaked_processes():
    """Marks every process this pytest process starts; at the session's end kills any still alive and
    fails, naming them (an operator node left retrying a dead chain for an hour was one)."""
    os.environ[OWNER] = str(os.getpid())
    yield
    leaked = owned_processes(os.getpid())
    for pid, _ in leaked:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if leaked:
        pytest.fail("processes left running by the tests (killed now):\n" +
                    "\n".join(f"  {pid}: {cmd[:200]}" for pid, cmd in leaked), pytrace=False)
