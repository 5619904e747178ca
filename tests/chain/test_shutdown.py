"""cvm/chain/shutdown.py in small real processes: the first SIGTERM or SIGINT ends a loop that swallows
the interrupt (a library's broad retry handler), a loop that never looks (by the forced exit), and a
second signal ends it at once. The nodes themselves: test_chain_shutdown.py."""

from __future__ import annotations

import signal
import sys
import textwrap

import pytest
from chainkit import ROOT
from testprocs import wait_for_line

from cvm.chain.shutdown import EXIT_FORCED

QUICK = 15.0  # seconds: "promptly" with room for a loaded machine (the grace in the scripts is 1 s)

PRELUDE = """
import logging, time
logging.basicConfig(level=logging.INFO)
from cvm.chain.shutdown import Shutdown
stop = Shutdown(grace=1.0).install()
print("ready", flush=True)
"""
SWALLOWING = """
while not stop.is_set():     # a retry loop whose handler also catches the interrupt
    try:
        time.sleep(0.2)
    except BaseException:
        pass
    stop.wait(0.2)
print("left the loop", flush=True)
"""
DEAF = """
while True:                  # a loop that neither lets the interrupt through nor checks the event
    try:
        time.sleep(0.1)
    except BaseException:
        pass
"""
PLAIN = """
while not stop.is_set():
    stop.wait(0.2)
"""


def run_script(processes, tmp_path, body: str):
    log = tmp_path / "script.log"
    proc = processes.start([sys.executable, "-c", textwrap.dedent(PRELUDE + body)], log, cwd=ROOT)
    wait_for_line(log, "^ready$", proc=proc)
    return proc, log


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_loop_that_swallows_the_interrupt_still_ends(processes, tmp_path, sig):
    proc, log = run_script(processes, tmp_path, SWALLOWING)
    assert processes.stop(proc, sig) < QUICK
    assert proc.returncode == 0 and "left the loop" in log.read_text()


def test_a_loop_that_never_looks_is_ended_by_the_forced_exit(processes, tmp_path):
    proc, log = run_script(processes, tmp_path, DEAF)
    assert processes.stop(proc) < QUICK
    assert proc.returncode == EXIT_FORCED and "exiting now" in log.read_text()


def test_a_second_signal_ends_it_at_once(processes, tmp_path):
    proc, log = run_script(processes, tmp_path, DEAF)
    proc.send_signal(signal.SIGTERM)
    wait_for_line(log, "SIGTERM received: stopping", proc=proc)
    assert processes.stop(proc, signal.SIGTERM) < QUICK
    assert proc.returncode == EXIT_FORCED and "second SIGTERM while stopping" in log.read_text()


def test_an_ordinary_loop_leaves_by_the_interrupt(processes, tmp_path):
    proc, log = run_script(processes, tmp_path, PLAIN)
    assert processes.stop(proc) < QUICK
    assert proc.returncode == 1 and "Stopped: SIGTERM" in log.read_text()  # uncaught: a command catches it
