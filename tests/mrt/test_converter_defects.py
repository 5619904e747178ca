"""Issue 30, converter defects: tiny ONNX models (onnx.helper) that failed to convert, each converted through
mrt.convert, run on CVM's reference interpreter and compared with onnxruntime's float output.

* A 1-D AveragePool (and MaxPool) became a conv2d / max_pool2d with one stride, which the verifier refused
  (`strides must be 2 ints`): mrt.passes.pool1d_as_2d makes them height-1 2-D pools; a 3-D pool is refused
  naming its node.
* Div by a constant: only a positive scalar divisor converted; a negative or non-scalar one was refused as
  "should be folded to mul" (nothing folded it unless a conv/dense came before), and a constant numerator
  (c / x) failed with an internal KeyError. Now x / c is x * (1 / c) (the mul rule) and c / x one lookup
  table of x (times c where c is a vector).
* Calibration refused an all-ones attention mask (what a fixed-length client sends) as "32 copies of one
  sample": only continuous inputs must vary; integer inputs and inputs read only as an index or a mask
  (mrt.pipeline.discrete_inputs) may be constant.
* Identity (and Dropout) had no quantization rule: mrt.passes.remove_identity drops them, but keeps one that
  carries a graph input, or another graph output, to a graph output; those now pass the integer tensor on.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mrt.pipeline as pipeline
from mrt.errors import BadInput
from mrt.pipeline import discrete_inputs, load_data

from conftest import build_model, ort_run
from test_transformer import _cosine, _encoder, _run, _text

REL_L2 = 0.03  # 8-bit activations: what these one- and two-node models reach is 0.005-0.015


def _cvm_vs_float(model, feeds: dict, **options) -> float:
    """The relative L2 distance of the converted model's output (reference backend) to onnxruntime's."""
    m = pipeline.convert(model, feeds, progress=False, **options)
    x = feeds if len(feeds) > 1 else next(iter(feeds.values()))
    got = m.dequantize_output(m.run(m.quantize_input(x), backend="reference"))
    want = next(iter(ort_run(model, feeds).values()))
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


POOLS_1D = [("AveragePool", dict(kernel_shape=[3], strides=[2])),
            ("AveragePool", dict(kernel_shape=[3], pads=[1, 1], count_include_pad=1)),
            ("AveragePool", dict(kernel_shape=[4], strides=[3], ceil_mode=1)),
            ("MaxPool", dict(kernel_shape=[3], strides=[2], dilations=[2])),
            ("MaxPool", dict(kernel_shape=[2], auto_pad="SAME_UPPER"))]


@pytest.mark.parametrize("op,attrs", POOLS_1D, ids=[f"{op}-{sorted(a)}" for op, a in POOLS_1D])
def test_1d_pool_converts_and_matches_float(rng, op, attrs):
    model = build_model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], {"x": (4, 17)}, ["y"])
    assert _cvm_vs_float(model, {"x": rng.standard_normal((32, 4, 17)).astype(np.float32)}) < REL_L2


def test_3d_pool_converts(rng):
    """A 3-D pool is a 2-D pool over (H, W) then one over D (mrt.onnx_import.ops_tail); it once was refused."""
    model = build_model([helper.make_node("MaxPool", ["x"], ["y"], name="pool3d", kernel_shape=[2, 2, 2])],
                        {"x": (2, 4, 4, 4)}, ["y"])
    assert _cvm_vs_float(model, {"x": rng.standard_normal((32, 2, 4, 4, 4)).astype(np.float32)}) < REL_L2



F32 = np.float32
DIVISORS = {"positive scalar": F32(3.0), "negative scalar": F32(-2.5),
            "vector": np.array([-3, -2, -1.5, -0.5, 0.5, 1, 2, 4], F32), "row": np.linspace(0.5, 4, 8, dtype=F32)[None]}
BEFORE = {"input": [], "relu": [helper.make_node("Relu", ["x"], ["x1"], name="relu")],
          "matmul": [helper.make_node("MatMul", ["x", "w"], ["x1"], name="mm")]}


@pytest.mark.parametrize("before", sorted(BEFORE))
@pytest.mark.parametrize("divisor", sorted(DIVISORS))
def test_div_by_a_constant_matches_float(rng, divisor, before):
    src = "x1" if BEFORE[before] else "x"
    nodes = BEFORE[before] + [helper.make_node("Div", [src, "c"], ["y"], name="div")]
    model = build_model(nodes, {"x": (4, 8)}, ["y"], {"c": DIVISORS[divisor], "w": rng.standard_normal((8, 8)).astype(F32)})
    assert _cvm_vs_float(model, {"x": rng.standard_normal((32, 4, 8)).astype(F32)}) < REL_L2


def test_div_of_conv_output_by_a_channel_vector(rng):
    """conv -> relu -> div by (C, 1, 1): the relu keeps the divisor from folding into the conv's weights."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["h"], pads=[1] * 4, name="conv"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"), helper.make_node("Div", ["r", "c"], ["y"], name="div")]
    model = build_model(nodes, {"x": (3, 6, 6)}, ["y"], {"w": rng.standard_normal((4, 3, 3, 3)).astype(F32),
                                                         "c": np.array([1.5, -2, 3, 0.5], F32).reshape(4, 1, 1)})
    assert _cvm_vs_float(model, {"x": rng.standard_normal((32, 3, 6, 6)).astype(F32)}) < REL_L2


@pytest.mark.parametrize("numerator", [F32(3.0), np.linspace(-2, 2, 8, dtype=F32)], ids=["scalar", "vector"])
def test_constant_divided_by_a_tensor_matches_float(rng, numerator):
    """c / x as a table of x: faithful where x stays away from 0, as a reciprocal's input does in a real model."""
    model = build_model([helper.make_node("Div", ["c", "x"], ["y"], name="recip")], {"x": (8,)}, ["y"], {"c": numerator})
    x = rng.uniform(0.5, 2, (32, 8)).astype(F32) * rng.choice([-1, 1], (32, 8)).astype(F32)
    assert _cvm_vs_float(model, {"x": x}) < REL_L2


def test_fixed_length_text_with_an_all_ones_mask_converts(rng):
    """The BERT-style encoder of test_transformer calibrated on fixed-length text: every mask all ones."""
    data = _text(64, 1)
    data["attention_mask"][:] = 1
    data["input_ids"] = rng.integers(1, 50, data["input_ids"].shape)
    onnx_model = _encoder()
    model = pipeline.convert(onnx_model, data, progress=False)
    held = {k: v[:16] for k, v in data.items()}
    want = ort_run(onnx_model, held)["embedding"]
    _, got = _run(model, held, "reference")
    assert _cosine(got, want).min() > 0.98


def test_constant_index_and_mask_inputs_are_discrete_but_constant_features_are_refused():
    """A float input read only as a masked softmax's mask may be constant too; a continuous one may not."""
    s = helper.make_node("MatMul", ["x", "xt"], ["s"], name="scores")
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]), s,
             helper.make_node("Sub", ["one", "mask"], ["inv"]), helper.make_node("Mul", ["inv", "big"], ["bias"]),
             helper.make_node("Add", ["s", "bias"], ["sb"]), helper.make_node("Softmax", ["sb"], ["y"], axis=-1)]
    model = build_model(nodes, {"x": (4, 4), "mask": (4, 4)}, ["y"], {"one": F32(1), "big": F32(-1e4)})
    x = np.random.default_rng(0).standard_normal((32, 4, 4)).astype(F32)
    graph = pipeline.prepare(model, {"x": x, "mask": np.ones((32, 4, 4), F32)}, progress=False,
                             softmax="integer").graph
    assert any(n.op == "masked_softmax" for n in graph.nodes)
    assert discrete_inputs(graph) == {"mask"}
    with pytest.raises(BadInput, match="'x' is 32 copies of one sample"):
        load_data({"x": np.repeat(x[:1], 32, axis=0), "mask": np.ones((32, 4, 4), F32)}, graph)


IDENTITIES = {
    "input to output": ([helper.make_node("Identity", ["x"], ["y"], name="ident")], ["y"]),
    "dropout, input to output": ([helper.make_node("Dropout", ["x"], ["y"], name="drop")], ["y"]),
    "output to output": ([helper.make_node("Relu", ["x"], ["h"], name="relu"),
                          helper.make_node("Identity", ["h"], ["y"], name="ident")], ["h", "y"]),
}


@pytest.mark.parametrize("case", sorted(IDENTITIES))
def test_identity_kept_by_remove_identity_converts(rng, case):
    nodes, outputs = IDENTITIES[case]
    model = build_model(nodes, {"x": (8,)}, outputs)
    x = rng.standard_normal((32, 8)).astype(F32)
    m = pipeline.convert(model, x, progress=False)
    got = m.run(m.quantize_input(x), backend="reference")
    got = got if isinstance(got, dict) else {m.outputs[0].name: got}
    want = ort_run(model, {"x": x})
    for spec, name in zip(m.outputs, outputs):
        y = got[spec.name] * float(m.meta["output_scales"][spec.name])
        assert np.linalg.norm(y - want[name]) / np.linalg.norm(want[name]) < REL_L2, name
