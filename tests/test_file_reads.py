"""Model files are read with a bound (issue 28, finding b): a device, a FIFO or a directory is
refused in one line naming it before any read, and no reader takes more than the limit plus one
byte, whatever stat() says (cvm.model_file). The commands run in a child process with a timeout and
a memory cap, so a reader that regresses fails the test instead of filling the machine."""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import cvm
from cvm import limits
from cvm.chain.store import BadModelFile, ModelStore
from cvm.model_file import read_model_file

ROOT = Path(__file__).resolve().parent.parent
TINY_CNN = ROOT / "fixtures/cvm/tiny_cnn.cvm"
TIMEOUT = 60  # seconds for a child to start, refuse and exit (a few on a quiet machine)
MEMORY_CAP = 4 << 30  # bytes of address space a child may take: far above what it needs
STATUS = Path("/proc/self/status")  # a regular file whose stat() says 0 bytes


def _child(args: list[str]) -> subprocess.CompletedProcess:
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=cap, env=env, cwd=ROOT)


def _assert_refused_in_one_line(proc: subprocess.CompletedProcess, path, kind: str) -> None:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and f"is {kind}" in lines[0], lines


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / "model.cvm"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [["verify"], ["run", "-i", "x.npy"], ["inspect"]])
def test_cli_refuses_dev_zero(command):
    proc = _child(["-m", "cvm.cli", command[0], "/dev/zero", *command[1:]])
    _assert_refused_in_one_line(proc, "/dev/zero", "a character device")


@pytest.mark.parametrize("command", [["verify"], ["run", "-i", "x.npy"]])
def test_cli_refuses_a_fifo_without_waiting_for_a_writer(fifo, command):
    proc = _child(["-m", "cvm.cli", command[0], str(fifo), *command[1:]])
    _assert_refused_in_one_line(proc, fifo, "a FIFO")


def test_store_refuses_devices_and_fifos_under_a_model_name(tmp_path):
    script = textwrap.dedent(f"""
        import os
        from cvm.chain.store import BadModelFile, ModelStore
        store = ModelStore({str(tmp_path)!r})
        os.mkfifo(store.path(b"\\1" * 32))
        os.symlink("/dev/zero", store.path(b"\\2" * 32))
        for h in (b"\\1" * 32, b"\\2" * 32):
            try:
                store.get(h)
            except BadModelFile as e:
                print(e)
        """)
    out = _child(["-c", script]).stdout.splitlines()
    assert len(out) == 2 and "is a FIFO" in out[0] and "is a character device" in out[1], out


def test_a_file_one_byte_over_the_limit_is_refused_by_its_path(tmp_path, monkeypatch):
    data = TINY_CNN.read_bytes()
    path = tmp_path / "m.cvm"
    path.write_bytes(data)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", len(data))
    assert cvm.load(path).hash == cvm.loads(data).hash  # at the limit: read
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", len(data) - 1)
    with pytest.raises(cvm.FormatError, match=f"{path} is {len(data)} bytes > limit {len(data) - 1}"):
        cvm.load(path)


@pytest.mark.skipif(not STATUS.exists(), reason="no /proc")
def test_a_file_whose_stat_says_nothing_is_read_to_the_limit_only(monkeypatch):
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 16)
    with pytest.raises(cvm.FormatError, match=f"{STATUS} holds more than the limit of 16 bytes"):
        read_model_file(STATUS)


def test_a_directory_is_refused_by_the_loader_and_the_store(tmp_path):
    with pytest.raises(cvm.FormatError, match=f"{tmp_path} is a directory, not a regular file"):
        cvm.load(tmp_path)
    store = ModelStore(tmp_path / "store")
    model = cvm.load(TINY_CNN)
    store.path(model.hash).mkdir()
    with pytest.raises(BadModelFile, match="is a directory"):
        store.get(model.hash)
    assert store.cache_info()["bad"] == 1  # remembered: not opened again until it changes


def test_store_refuses_an_oversized_file_and_remembers_it(tmp_path, monkeypatch):
    store = ModelStore(tmp_path)
    h = store.put(TINY_CNN)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", TINY_CNN.stat().st_size - 1)
    fresh = ModelStore(tmp_path)
    with pytest.raises(BadModelFile, match="> limit"):
        fresh.get(h)
    assert fresh.cache_info()["bad"] == 1
