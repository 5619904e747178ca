"""What a new user meets from `cvm` (issue 38): a truncated input file is bad input (exit 2, one line), an ONNX
file given to the VM says to convert it, printed output says what it left out, and every option of `cvm run`
has help text."""
from pathlib import Path

import numpy as np
import pytest

from cvm import clikit
from cvm.cli import build_parser, main, preview

FIXTURES = Path(__file__).parents[2] / "fixtures"
MODEL = str(FIXTURES / "cvm" / "tiny_cnn.cvm")


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("cvm: error:"), err
    return err[0]


@pytest.mark.parametrize("keep", [0.0, 0.5, 0.97])
def test_truncated_npz_input_is_bad_input(tmp_path, capsys, keep):
    x = np.load(FIXTURES / "cvm" / "tiny_cnn_input.npy").astype(np.float32) / 127
    np.savez(tmp_path / "x.npz", x=x)
    data = (tmp_path / "x.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:int(len(data) * keep)])
    assert main(["run", MODEL, "-i", str(tmp_path / "cut.npz")]) == clikit.EXIT_BAD_INPUT
    assert "cannot read" in _one_error_line(capsys)


def test_truncated_npy_input_is_bad_input(tmp_path, capsys):
    data = (FIXTURES / "cvm" / "tiny_cnn_input.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:len(data) // 2])
    assert main(["run", MODEL, "-i", str(tmp_path / "cut.npy"), "--raw"]) == clikit.EXIT_BAD_INPUT
    assert "cannot read" in _one_error_line(capsys)


@pytest.mark.parametrize("command", ["verify", "inspect", "run"])
def test_onnx_file_says_convert_it(capsys, command):
    onnx = str(FIXTURES / "models" / "digits_mlp.onnx")
    argv = [command, onnx] + (["-i", str(FIXTURES / "cvm" / "tiny_cnn_input.npy")] if command == "run" else [])
    assert main(argv) == clikit.EXIT_BAD_INPUT
    assert "looks like ONNX" in (line := _one_error_line(capsys)) and f"mrt convert {onnx}" in line


def test_preview_says_what_it_cut():
    text = preview(np.arange(1000 * 20).reshape(1000, 20))
    assert "... 996 more rows" in text and "(4 more values)" in text and "... 968 more" in text
    short = preview(np.arange(8).reshape(2, 4))
    assert "more" not in short


def test_run_prints_the_cut_note(capsys, tmp_path):
    x = np.load(FIXTURES / "cvm" / "tiny_cnn_input.npy")
    np.save(tmp_path / "x.npy", np.concatenate([x, x]))
    assert main(["run", MODEL, "-i", str(tmp_path / "x.npy"), "--raw", "--backend", "reference"]) == 0
    assert "... 4 more rows" in capsys.readouterr().out


def test_limit_runs_the_first_samples(capsys):
    assert main(["run", MODEL, "-i", str(FIXTURES / "cvm" / "tiny_cnn_input.npy"), "--raw", "--limit", "1",
                 "--backend", "reference"]) == 0
    assert "shape (1, 10)" in capsys.readouterr().out


def _subparser(parser, name):
    return next(a for a in parser._actions if a.dest == "command").choices[name]


@pytest.mark.parametrize("command", ["run", "verify", "inspect"])
def test_every_argument_has_help_and_its_default(command):
    sub = _subparser(build_parser(), command)
    text = sub.format_help()
    for action in sub._actions:
        assert action.help, f"cvm {command}: {action.dest} has no help"
        if action.default not in (None, False) and not action.required and action.dest != "help":
            assert f"(default: {action.default})" in " ".join(text.split()), action.dest
    assert "(default: numba)" in " ".join(text.split()) or command != "run"
