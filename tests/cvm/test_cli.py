"""The `cvm` CLI on the committed fixture: inspect, verify, run, and clear errors with non-zero exits."""
from pathlib import Path

import numpy as np

from cvm.cli import main
from test_format import GOLDEN_HASH, GOLDEN_OUTPUT_HASH

FIXTURES = Path(__file__).parents[2] / "fixtures" / "cvm"
MODEL = str(FIXTURES / "tiny_cnn.cvm")


def test_inspect(capsys):
    assert main(["inspect", MODEL]) == 0
    out = capsys.readouterr().out
    assert GOLDEN_HASH in out and "largest accumulator: 21 bits" in out and "conv2d" in out
    assert main(["inspect", MODEL, "--nodes"]) == 0
    assert "conv1.q" in capsys.readouterr().out


def test_verify_ok_and_bad(tmp_path, capsys):
    assert main(["verify", MODEL]) == 0
    bad = tmp_path / "bad.cvm"
    bad.write_bytes(Path(MODEL).read_bytes()[:50])
    assert main(["verify", str(bad)]) == 2
    assert "error:" in capsys.readouterr().err


def test_run_raw_prints_hash_last(capsys, tmp_path):
    for backend in ("reference", "numba"):
        assert main(["run", MODEL, "--input", str(FIXTURES / "tiny_cnn_input.npy"), "--raw",
                     "--backend", backend]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last == f"output-hash: {GOLDEN_OUTPUT_HASH}"


def test_run_float_input_is_quantized(tmp_path, capsys):
    x = np.load(FIXTURES / "tiny_cnn_input.npy").astype(np.float32) / 127
    np.savez(tmp_path / "x.npz", x=x)
    out = tmp_path / "y.npy"
    assert main(["run", MODEL, "-i", str(tmp_path / "x.npz"), "-o", str(out), "--backend", "reference"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"output-hash: {GOLDEN_OUTPUT_HASH}"
    assert np.load(out).shape == (4, 10)


def test_run_gas_limit_error(capsys):
    assert main(["run", MODEL, "-i", str(FIXTURES / "tiny_cnn_input.npy"), "--raw", "--gas-limit", "10",
                 "--backend", "reference"]) == 2
    assert "gas limit is 10" in capsys.readouterr().err
