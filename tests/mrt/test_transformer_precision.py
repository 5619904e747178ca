"""Mixed precision of transformer encoders: mrt.text_precision picks the tensors to widen, and calibration
gives each wide tensor the threshold of its own bits (mse at 8 bits clips what 12 bits keep)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mrt.calibrate import calibrate
from mrt.onnx_import import import_onnx
from mrt.passes import DEFAULT_PIPELINE, run_pipeline
from mrt.text_precision import PARTS, encoder_wide_tensors
from tests.mrt.test_transformer import _encoder, _text


@pytest.fixture(scope="module")
def graph():
    return run_pipeline(import_onnx(_encoder().SerializeToString()), DEFAULT_PIPELINE)


def test_wide_tensors_of_an_encoder(graph):
    ops = {n.outputs[0]: n.op for n in graph.nodes}
    wide = set(encoder_wide_tensors(graph))
    assert {n.outputs[0] for n in graph.nodes if n.op == "layer_norm"} <= wide
    assert {n.outputs[0] for n in graph.nodes if n.op == "univariate"} <= wide
    assert not wide & set(graph.outputs)
    assert not wide & set(graph.initializers)
    assert {ops.get(t) for t in wide} <= {"layer_norm", "univariate", "add", "dense", "embed", "sum", "div_tensor", None}
    assert set(encoder_wide_tensors(graph, ("layer_norm",))) == {t for t, op in ops.items() if op == "layer_norm"}
    with pytest.raises(ValueError, match="unknown wide-tensor parts"):
        encoder_wide_tensors(graph, ("gelu",))
    assert set(PARTS) == {"activations", "layer_norm", "residual", "dense"}


def test_wide_tensors_are_calibrated_at_their_bits(graph):
    data = _text(128, 1)
    wide = encoder_wide_tensors(graph)
    base = calibrate(graph, data, method="mse", progress=False)
    at12 = calibrate(graph, data, method="mse", bits=12, progress=False)
    mixed = calibrate(graph, data, method="mse", progress=False, wide=wide, wide_bits=12)
    for name in base:
        assert mixed[name] == (at12[name] if name in wide else base[name]), name
    assert any(at12[t] > base[t] for t in wide)  # 12 bits clip less
    assert np.isfinite(list(mixed.values())).all()


def test_parse_parts():
    from mrt.text_precision import parse_parts
    assert parse_parts("encoder") == PARTS
    assert parse_parts("dense, layer_norm") == ("dense", "layer_norm")
    for bad in ("gelu", "", ","):
        with pytest.raises(ValueError, match="unknown wide-tensor parts"):
            parse_parts(bad)


FIXTURE = Path(__file__).parents[2] / "fixtures"


def test_cli_converts_and_evaluates_an_encoder_with_two_integer_inputs(tmp_path, capsys):
    """`mrt convert --wide encoder --weight-bits 10` and `mrt eval --compare-ort` on the committed
    text_embedder (token ids and mask as int arrays named after the inputs)."""
    from mrt.cli import main
    with np.load(FIXTURE / "data" / "text_encoder.npz") as d:
        np.savez(tmp_path / "calib.npz", input_ids=d["calib_input_ids"][:64], attention_mask=d["calib_attention_mask"][:64])
        np.savez(tmp_path / "test.npz", input_ids=d["test_input_ids"][:64], attention_mask=d["test_attention_mask"][:64])
    onnx_path, out = FIXTURE / "models" / "text_embedder.onnx", tmp_path / "e.cvm"
    assert main(["convert", str(onnx_path), "--calib", str(tmp_path / "calib.npz"), "-o", str(out),
                 "--wide", "encoder", "--weight-bits", "10"]) == 0
    assert main(["eval", str(onnx_path), str(out), "--data", str(tmp_path / "test.npz"), "--calib",
                 str(tmp_path / "calib.npz"), "--compare-ort", "--plot", str(tmp_path / "l.png")]) == 0
    text = capsys.readouterr().out
    cvm_row = next(line for line in text.splitlines() if line.startswith("cvm integer"))
    assert float(cvm_row.split()[-2]) > 0.999  # cosine of the embeddings to float's (then their relative L2)
    assert "onnxruntime int8" in text and (tmp_path / "l.png").exists()
    assert main(["convert", str(onnx_path), "--calib", str(tmp_path / "calib.npz"), "-o", str(out),
                 "--wide", "gelu"]) == 2



def test_a_division_reads_a_requantized_numerator_when_its_range_leaves_no_bits():
    """y = x / (sum(x^2) + 1), then y / |y|, every tensor widened: y is a raw quotient proven only within
    2^30 (numerator x 2^p / 1), which leaves the second division no bits to widen it by; div_tensor then
    requantizes it to its activation bits first (every MiniLM tensor widened gave cosine 0.776 before:
    tests/mrt/test_transformer.py's MiniLM test, 'every tensor')."""
    from onnx import TensorProto, helper

    from mrt.pipeline import convert
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceSum", ["sq", "axes"], ["s"], keepdims=1),
             helper.make_node("Add", ["s", "one"], ["s1"]),
             helper.make_node("Div", ["x", "s1"], ["y"]),
             helper.make_node("ReduceL2", ["y", "axes"], ["n"], keepdims=1),
             helper.make_node("Div", ["y", "n"], ["z"])]
    g = helper.make_graph(nodes, "divdiv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
                           helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()
    calib = np.random.default_rng(0).normal(size=(64, 16)).astype(np.float32)
    graph = run_pipeline(import_onnx(model), DEFAULT_PIPELINE)
    every = tuple(sorted({n.outputs[0] for n in graph.nodes} - set(graph.outputs)))
    m = convert(model, calib, progress=False, wide_tensors=every)
    made = {n.output: n for n in m.graph.nodes}
    num = made[made["z"].inputs[0]]  # z = div(z.num, z.den); z.num = mul(requant(y), 2^p)
    assert num.op == "mul" and made[num.inputs[0]].op == "requant" and made[num.inputs[0]].inputs[0] == "y"
    assert int(m.graph.constants[num.inputs[1]].reshape(-1)[0]) >= 2 ** 8  # widened by p >= 8 bits
