"""A model too large for the format in every opset fails `mrt convert` at import, in one line naming
the tensor and the limit, before calibration runs (the limits are shrunk here so the models stay small);
`--calib-batch-size` reaches calibration."""
from dataclasses import replace

import numpy as np
import pytest
from onnx import helper

from cvm import clikit, limits
from mrt import calibrate as calibrate_module
from mrt.cli import main


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(limits, "NEWEST", replace(limits.NEWEST, tensor_elements=4096, constant_elements=1000,
                                                  total_constant_elements=1500))


@pytest.fixture
def no_calibration(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("calibration ran")
    monkeypatch.setattr("mrt.pipeline.calibrate", refuse)


def _dense(onnx_model, rows, cols, extra=0):
    rng = np.random.default_rng(0)
    inits = {"w": rng.standard_normal((rows, cols)).astype(np.float32), "b": np.zeros(rows, np.float32)}
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)]
    if extra:
        inits["w2"] = rng.standard_normal((extra, rows)).astype(np.float32)
        nodes.append(helper.make_node("Gemm", ["y", "w2"], ["z"], transB=1))
    return onnx_model(nodes, {"x": (cols,)}, ["z" if extra else "y"], inits)


def _convert(tmp_path, capsys, model, samples=16, per_sample=None, extra_args=()):
    path, calib, out = tmp_path / "m.onnx", tmp_path / "c.npz", tmp_path / "m.cvm"
    path.write_bytes(model.SerializeToString())
    shape = per_sample or tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:])
    np.savez(calib, x=np.random.default_rng(1).standard_normal((samples, *shape)).astype(np.float32))
    code = main(["convert", str(path), "--calib", str(calib), "-o", str(out), *extra_args])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("rows, cols, extra, message", [
    (40, 30, 0, "w' has 1200 elements > CVM's limit 1000 [limits.elements]"),
    (30, 30, 30, "the constants hold 1830 elements > CVM's limit 1500 [limits.constants]"),
    (2, 5000, 0, "input 'x' has 5000 elements per sample > CVM's limit 4096 [limits.elements]"),
])
def test_too_large_for_any_opset_fails_at_import(tmp_path, capsys, onnx_model, small_limits, no_calibration,
                                                 rows, cols, extra, message):
    code, err = _convert(tmp_path, capsys, _dense(onnx_model, rows, cols, extra))
    assert code == clikit.EXIT_BAD_INPUT and len(err) == 1 and err[0].startswith("mrt: error:"), err
    assert message in err[0]
    assert not (tmp_path / "m.cvm").exists()


def test_an_activation_over_the_per_sample_limit_fails_at_import(tmp_path, capsys, onnx_model, small_limits,
                                                                 no_calibration):
    model = _dense(onnx_model, 5000, 4)  # y: 5000 elements per sample
    model.graph.initializer[0].CopyFrom(helper.make_tensor("w", 1, [5000, 4], [0.5] * 20000))
    code, err = _convert(tmp_path, capsys, model)
    assert code == clikit.EXIT_BAD_INPUT and len(err) == 1
    assert "5000 elements per sample > CVM's limit 4096 [limits.elements]" in err[0]


def test_calib_batch_size_reaches_calibration(tmp_path, capsys, onnx_model, monkeypatch):
    sizes = []
    real = calibrate_module.calibrate

    def spy(*a, **k):
        sizes.append(k["batch_size"])
        return real(*a, **k)
    monkeypatch.setattr("mrt.pipeline.calibrate", spy)
    code, err = _convert(tmp_path, capsys, _dense(onnx_model, 4, 6), samples=20, extra_args=["--calib-batch-size", "7"])
    assert code == 0 and sizes == [7], err
    code, err = _convert(tmp_path, capsys, _dense(onnx_model, 4, 6), extra_args=["--calib-batch-size", "0"])
    assert code == clikit.EXIT_BAD_INPUT and "batch size 0 must be at least 1" in err[-1]
