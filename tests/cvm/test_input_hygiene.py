"""Hostile inputs and every CLI failure: a clear one-line error and a non-zero exit, never a traceback,
never a silent wrong answer (NaN used to quantize to 0 and `cvm run` exited 0)."""
import glob
from pathlib import Path

import msgpack
import numpy as np
import pytest

import cvm
from cvm import clikit
from cvm.cli import main
from cvm.format import decode_file, encode_file

ROOT = Path(__file__).parents[2]
DIGITS = ROOT / "fixtures" / "models" / "digits_mlp.cvm"  # one input x (64,), per-feature scales
MODELS = sorted(glob.glob(str(ROOT / "fixtures" / "**" / "*.cvm"), recursive=True))


@pytest.fixture(scope="module")
def digits():
    return cvm.load(DIGITS)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_float_input_is_refused(digits, value):
    x = np.full((2, 64), 0.5)
    x[1, 7] = value
    with pytest.raises(cvm.InputError, match=r"input 'x' holds .* at index \(1, 7\): NaN and infinity"):
        digits.quantize_input(x)


@pytest.mark.parametrize("data", [
    [[1, 2, 3], [4, 5]],                           # ragged
    [[1] * 64, [1] * 63],
    np.array([[1, 2], [3]], dtype=object),         # object array
])
def test_ragged_input_is_refused(digits, data):
    for call in (digits.run, digits.quantize_input):
        with pytest.raises(cvm.InputError):
            call(data)


@pytest.mark.parametrize("data,message", [
    (np.ones((1, 64), bool), "must hold integers, got dtype bool"),
    (np.full((1, 64), "7"), "must hold integers"),
    (np.ones((1, 63), np.int16), r"must have shape \(batch, 64\)"),
    (np.ones((0, 64), np.int16), "batch size 0"),
])
def test_wrong_input_is_refused(digits, data, message):
    with pytest.raises(cvm.InputError, match=message):
        digits.run(data)


def test_per_feature_scales_need_the_features(digits):
    with pytest.raises(cvm.InputError, match="64 per-feature scales; its last axis must have 64"):
        digits.quantize_input(np.zeros((1, 8)))


def _one_line_error(capsys, argv, code=2, match=None):
    assert main(argv) == code
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("cvm") and "Traceback" not in err
    if match:
        assert match in err, err
    return err


def test_cli_nan_input(tmp_path, capsys):
    x = np.full((1, 64), 0.5, np.float32)
    x[0, 3] = np.nan
    np.save(tmp_path / "x.npy", x)
    _one_line_error(capsys, ["run", str(DIGITS), "-i", str(tmp_path / "x.npy")], match="NaN and infinity")


def test_cli_unreadable_input(tmp_path, capsys):
    (tmp_path / "x.npy").write_bytes(b"not numpy")
    _one_line_error(capsys, ["run", str(DIGITS), "-i", str(tmp_path / "x.npy")], match="cannot read")
    np.save(tmp_path / "o.npy", np.array([[1, 2], [3]], dtype=object), allow_pickle=True)
    _one_line_error(capsys, ["run", str(DIGITS), "-i", str(tmp_path / "o.npy")], match="cannot read")
    _one_line_error(capsys, ["run", str(DIGITS), "-i", str(tmp_path / "missing.npy")])


def _malformed_files():
    consensus, meta = decode_file(DIGITS.read_bytes())
    return {
        "bytes key": msgpack.packb({"format": "cvm", "graph": consensus, "meta": {}, b"x": 1}, use_bin_type=True),
        "input_scales": encode_file(consensus, {"input_scales": 5}),
        "output_scales": encode_file(consensus, {"output_scales": {"logits.out": "x"}}),
        "graph twice": b"\x84" + b"".join(msgpack.packb(v, use_bin_type=True) for v in
                                           ("format", "cvm", "graph", consensus, "meta", {}, "graph", b"")),
        "truncated": DIGITS.read_bytes()[:100],
        "empty": b"",
    }


@pytest.mark.parametrize("name", list(_malformed_files()))
@pytest.mark.parametrize("command", ["verify", "inspect"])
def test_cli_malformed_model_file(tmp_path, capsys, name, command):
    path = tmp_path / "m.cvm"
    path.write_bytes(_malformed_files()[name])
    _one_line_error(capsys, [command, str(path)], match="cvm: error:")


@pytest.mark.parametrize("path", MODELS, ids=lambda p: Path(p).name)
def test_cli_inspect_every_committed_model(path, capsys):
    assert main(["inspect", path]) == 0
    out = capsys.readouterr().out
    assert "hash:" in out and "gas:" in out


def test_inspect_shows_per_feature_scales(capsys):
    assert main(["inspect", str(ROOT / "fixtures" / "models" / "cancer_linear.cvm")]) == 0
    assert "30 per feature" in capsys.readouterr().out


def test_usage_errors_are_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["run", str(DIGITS)])
    assert e.value.code == clikit.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "required: --input/-i" in err


def test_internal_errors_are_one_line_with_a_hint(monkeypatch, capsys):
    def boom(args):
        raise KeyError("a bug")
    monkeypatch.setattr("cvm.cli.cmd_verify", boom)
    err = _one_line_error(capsys, ["verify", str(DIGITS)], code=clikit.EXIT_INTERNAL)
    assert "internal error: KeyError" in err and "CVM_DEBUG=1" in err
    monkeypatch.setenv("CVM_DEBUG", "1")
    assert main(["verify", str(DIGITS)]) == clikit.EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err
