"""What a new user meets from `mrt` (issue 38): a truncated calibration file is bad input (exit 2, one line); an
output path that cannot be written fails before any calibration; the MiniLM export's calib_* arrays are read as
they are; string labels give no top-1 figure; every option has help text and its default; long steps show progress
on a terminal and nothing elsewhere."""
import io
import re
import time
from pathlib import Path

import numpy as np
import pytest

from cvm import clikit
from mrt import pipeline
from mrt.calibrate import calibrate
from mrt.cli import build_parser, main
from mrt.onnx_import import import_onnx
from mrt.progress import ticker

FIX = Path(__file__).parents[2] / "fixtures"
DIGITS, DIGITS_CVM = FIX / "models" / "digits_mlp.onnx", FIX / "models" / "digits_mlp.cvm"
CALIB = FIX / "data" / "digits_mlp_calib.npz"


@pytest.fixture
def no_conversion(monkeypatch):
    """Fails the test if a conversion starts: the error must come before calibration."""
    def refuse(*args, **kwargs):
        raise AssertionError("convert ran")
    monkeypatch.setattr(pipeline, "convert", refuse)


def _error(capsys, argv) -> str:
    assert main(argv) == clikit.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("mrt: error:"), err
    return err[0]


@pytest.mark.parametrize("keep", [0.1, 0.6, 0.99])
def test_truncated_calibration_is_bad_input(tmp_path, capsys, no_conversion, keep):
    data = CALIB.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[:int(len(data) * keep)])
    err = _error(capsys, ["convert", str(DIGITS), "--calib", str(tmp_path / "cut.npz"), "-o", str(tmp_path / "m.cvm")])
    assert "cannot read" in err and "cut.npz" in err


def test_missing_output_folder_fails_before_calibration(tmp_path, capsys, no_conversion):
    out = tmp_path / "missing_dir" / "x.cvm"
    err = _error(capsys, ["convert", str(DIGITS), "--calib", str(CALIB), "-o", str(out)])
    assert f"directory {out.parent} does not exist" in err
    err = _error(capsys, ["convert", str(DIGITS), "--calib", str(CALIB), "-o", str(tmp_path)])
    assert "is a directory" in err


def test_calib_prefixed_arrays_are_the_calibration_set(tmp_path):
    x = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    np.savez(tmp_path / "split.npz", calib_input_ids=x, calib_attention_mask=x, held_input_ids=x[:2])
    assert sorted(pipeline.read_calibration(tmp_path / "split.npz")) == ["attention_mask", "input_ids"]
    np.savez(tmp_path / "plain.npz", x=x)
    assert list(pipeline.read_calibration(tmp_path / "plain.npz")) == ["x"]


def test_string_labels_give_no_top1(tmp_path, capsys):
    with np.load(FIX / "data" / "digits_mlp_test.npz") as d:
        x, y = d["x"][:32].astype(np.float32), d["y"][:32]
    np.savez(tmp_path / "t.npz", x=x, y=np.array([f"digit {v}" for v in y]))
    assert main(["eval", str(DIGITS), str(DIGITS_CVM), "--data", str(tmp_path / "t.npz"),
                 "--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "top-1 accuracy does not apply" in out and not re.search(r"(?<![\d.])0\.00%", out)
    row = next(line for line in out.splitlines() if line.startswith("cvm integer"))
    assert row.split()[2] == "-"


def _subparser(name):
    return next(a for a in build_parser()._actions if a.dest == "command").choices[name]


@pytest.mark.parametrize("command", ["convert", "eval"])
def test_every_argument_has_help_and_its_default(command):
    sub = _subparser(command)
    text = " ".join(sub.format_help().split())
    for action in sub._actions:
        assert action.help, f"mrt {command}: {action.dest} has no help"
        takes_value = action.nargs != 0 and action.option_strings
        if takes_value and not action.required:
            shown = f"(default: {action.default})" in text or "default" in action.help
            assert shown, f"mrt {command}: {action.dest} does not say its default"


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _calibrate_on(stream, monkeypatch, progress=True):
    monkeypatch.setattr("sys.stderr", stream)
    graph = import_onnx(DIGITS, {"x": (64,)})
    with np.load(CALIB) as d:
        calibrate(graph, d["x"][:32].astype(np.float32), batch_size=64, progress=progress)
    return graph


def test_progress_moves_within_one_batch_on_a_terminal(monkeypatch):
    screen = _Terminal()
    graph = _calibrate_on(screen, monkeypatch)
    steps = len(graph.inputs) + len(graph.nodes)
    assert f"0/{steps} " in screen.getvalue() and "1 batch" in screen.getvalue()  # counts nodes, not batches


def test_progress_is_quiet_off_a_terminal(monkeypatch):
    log = io.StringIO()
    _calibrate_on(log, monkeypatch)
    assert log.getvalue() == ""
    with ticker("quiet", True):
        time.sleep(0.01)
    assert log.getvalue() == ""


def test_ticker_shows_elapsed_time(monkeypatch):
    screen = _Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    with ticker("convert: verify"):
        time.sleep(1.2)
    assert "convert: verify: 00:01" in screen.getvalue()
