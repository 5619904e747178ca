"""`mrt convert --opset 3` writes the model in opset 3 (gas schedule v2, docs/spec.md section 16): the
same graph and outputs as the default conversion, the schedule-v2 gas; any other opset is refused."""
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm import gas_v2
from mrt.cli import main as mrt_main

FIX = Path(__file__).resolve().parents[2] / "fixtures"


def test_convert_opset_3(tmp_path, capsys):
    onnx, calib = FIX / "models" / "digits_mlp.onnx", FIX / "data" / "digits_mlp_calib.npz"
    default, priced = tmp_path / "v1.cvm", tmp_path / "v3.cvm"
    assert mrt_main(["convert", str(onnx), "--calib", str(calib), "-o", str(default)]) == 0
    assert mrt_main(["convert", str(onnx), "--calib", str(calib), "-o", str(priced), "--opset", "3"]) == 0
    m1, m3 = cvm.load(default), cvm.load(priced)
    assert m1.graph.opset == 1 and m3.graph.opset == 3 and m3.graph.nodes == m1.graph.nodes
    assert m3.gas == gas_v2.model_gas(m1) < m1.gas and f"gas {m3.gas}" in capsys.readouterr().out
    with np.load(FIX / "data" / "digits_mlp_test.npz") as d:
        x = m1.quantize_input(d["x"][:16])
    assert np.array_equal(m3.run(x), m1.run(x, backend="reference"))


def test_convert_opset_4(tmp_path):
    """Opset 4 (schedule v3): the same graph and outputs, v3's gas: v2's plus EDGE per listed input (this
    MLP has no large data-movement node) and, per call, the constants' load charge."""
    from cvm import gas_v3
    onnx, calib = FIX / "models" / "digits_mlp.onnx", FIX / "data" / "digits_mlp_calib.npz"
    out3, out4 = tmp_path / "v3.cvm", tmp_path / "v4.cvm"
    assert mrt_main(["convert", str(onnx), "--calib", str(calib), "-o", str(out3), "--opset", "3"]) == 0
    assert mrt_main(["convert", str(onnx), "--calib", str(calib), "-o", str(out4), "--opset", "4"]) == 0
    m3, m4 = cvm.load(out3), cvm.load(out4)
    assert m4.graph.opset == 4 and m4.graph.nodes == m3.graph.nodes
    assert m4.gas == m3.gas + gas_v3.EDGE * sum(len(n.inputs) for n in m4.graph.nodes)
    assert m4.call_gas(1) - m4.gas > m3.call_gas(1) - m3.gas  # the load term
    with np.load(FIX / "data" / "digits_mlp_test.npz") as d:
        x = m3.quantize_input(d["x"][:16])
    assert np.array_equal(m4.run(x), m3.run(x, backend="reference"))


def test_convert_refuses_other_opsets(tmp_path, capsys):
    with pytest.raises(SystemExit):
        mrt_main(["convert", str(FIX / "models" / "digits_mlp.onnx"), "--calib",
                  str(FIX / "data" / "digits_mlp_calib.npz"), "-o", str(tmp_path / "x.cvm"), "--opset", "2"])
    assert "--opset" in capsys.readouterr().err
