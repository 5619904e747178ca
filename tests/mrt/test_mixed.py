"""Mixed precision: wide activations only where they lower the output error, within a latency budget."""
from pathlib import Path

import numpy as np

from mrt import mixed
from mrt.cli import main as mrt_main

FIX = Path(__file__).parents[2] / "fixtures"


def _calib():
    with np.load(FIX / "data" / "mnist_cnn_calib.npz") as d:
        return d["x"][:128]


def test_kept_steps_lower_the_error_and_widen_their_tensors():
    r = mixed.convert_mixed(FIX / "models" / "mnist_cnn.onnx", _calib(), latency_budget=100.0)  # no latency limit
    errors = [s.output_rel_l2 for s in r.steps if s.kept]
    assert r.steps[0].tensor == "" and errors == sorted(errors, reverse=True) and len(errors) > 1
    assert list(r.model.meta["quantization"]["wide_tensors"]) == r.wide
    tmap = r.model.meta["tensor_map"]
    assert any(r.model.analysis.tensors[tmap[t][0]].bits > 9 for t in r.wide if t in tmap)


def test_injected_error_ranks_by_increase_over_the_input():
    from mrt.graph import Node
    from mrt.layer_report import LayerError

    class G:
        nodes = [Node("relu", ("a",), ("b",)), Node("relu", ("b",), ("c",))]
    ranked = mixed.injected_error([LayerError("a", 0.1), LayerError("b", 0.15), LayerError("c", 0.4)], G)
    assert [n for n, _ in ranked] == ["c", "a", "b"]


def test_cli_prints_the_report(tmp_path, capsys):
    np.savez(tmp_path / "c.npz", x=_calib())
    out = tmp_path / "m.cvm"
    assert mrt_main(["convert", str(FIX / "models" / "mnist_cnn.onnx"), "--calib", str(tmp_path / "c.npz"),
                     "-o", str(out), "--mixed-precision", "100"]) == 0
    text = capsys.readouterr().out
    assert "mixed precision:" in text and "(start: no wide tensor)" in text and out.exists()
