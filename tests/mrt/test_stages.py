"""The conversion is a named list of stages with a dump hook: what each produced can be looked at."""
from pathlib import Path

import numpy as np

import cvm
from mrt import pipeline
from mrt.cli import main as mrt_main

FIX = Path(__file__).parents[2] / "fixtures"


def _calib():
    with np.load(FIX / "data" / "digits_mlp_calib.npz") as d:
        return d["x"]


def test_stages_are_named_in_order(capsys):
    names = [s.name for s in pipeline.CONVERSION]
    assert names == ["import", "passes", "output_transform", "calibrate", "quantize", "verify"]
    assert mrt_main(["stages"]) == 0
    assert [line.split()[1] for line in capsys.readouterr().out.splitlines()] == names


def test_dump_writes_each_stage_and_the_passes(tmp_path):
    model = pipeline.convert(FIX / "models" / "digits_mlp.onnx", _calib(), progress=False, dump=tmp_path)
    files = sorted(p.name for p in tmp_path.glob("*.txt"))
    assert files == ["01_import.txt", "02_passes.txt", "03_output_transform.txt", "04_calibrate.txt",
                     "05_quantize.txt", "06_verify.txt"]
    assert (tmp_path / "passes" / "00_input.txt").exists()
    assert model.hash_hex in (tmp_path / "06_verify.txt").read_text()
    quantized = (tmp_path / "05_quantize.txt").read_text()
    assert quantized.startswith("# 8-bit activations (")  # the measured width and why (mrt.width_choice)
    assert quantized.endswith(str(model.graph) + "\n")


def test_dump_hook_sees_every_stage_and_changes_nothing():
    seen = []
    hooked = pipeline.convert(FIX / "models" / "digits_mlp.onnx", _calib(), progress=False,
                              dump=lambda n, name, shown: seen.append((n, name)))
    plain = pipeline.convert(FIX / "models" / "digits_mlp.onnx", _calib(), progress=False)
    assert [name for _, name in seen] == [s.name for s in pipeline.CONVERSION]
    assert isinstance(hooked, cvm.Model) and hooked.hash == plain.hash
