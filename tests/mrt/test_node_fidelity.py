"""ONNX node-test cases that converted but came out wrong (scripts/models/node_tests.py "failed"), each as a tiny
ONNX model (onnx.helper) reproducing the pattern, converted through mrt.convert, run on CVM's reference
interpreter and compared with onnxruntime's float output.

* log(sum(exp(x))) written out (ReduceLogSumExp's expanded body): exp's table over inputs 1..60 spans 1e26, so
  every exp but the largest rounded to zero and a row's log was the log of zero (cosine -0.04);
  mrt.passes.fuse_log_sum_exp shifts by the row maximum.
* Round / Floor (integer-valued tables): the output was at scale max/127 (floor 1.0 -> 1.0078) and the input at
  max/127, where round's ties (0.5, 1.5) are not representable and an mse threshold just under 2.0 made
  floor(2.0) = 1. Such a table now keeps integers at scale 1 and narrows a wider input to a power-of-two scale
  (an 8-bit input is read as it is: a second rounding made random data worse).
* A lone square (Pow(x, 2), x * x: a variance's E[x^2] in MeanVarianceNormalization's expanded body) was a table
  rounding x^2 to 8 bits before the cancellation of E[x^2] - E[x]^2; it is now an exact integer product
  (mrt.passes.fuse_univariate): mvn_expanded rel L2 0.0101 -> 0.0093.
"""
from __future__ import annotations

import numpy as np
from onnx import helper

import mrt.pipeline as pipeline

from conftest import build_model, ort_run

F32 = np.float32


def _cvm_and_float(model, feeds: dict, **options):
    """(converted model's output on the reference backend, onnxruntime's float output)."""
    m = pipeline.convert(model, feeds, progress=False, **options)
    x = feeds if len(feeds) > 1 else next(iter(feeds.values()))
    got = m.dequantize_output(m.run(m.quantize_input(x), backend="reference"))
    want = next(iter(ort_run(model, feeds).values()))
    assert got.shape == want.shape, (got.shape, want.shape)
    return got, want


def _rel_l2(got, want) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def test_log_sum_exp_written_out_keeps_small_rows(rng):
    nodes = [helper.make_node("Exp", ["x"], ["e"], name="exp"),
             helper.make_node("ReduceSum", ["e", "axes"], ["s"], name="sum", keepdims=0),
             helper.make_node("Log", ["s"], ["y"], name="log")]
    model = build_model(nodes, {"x": (3, 4)}, ["y"], {"axes": np.array([2], np.int64)})
    x = rng.uniform(0, 10, (16, 3, 4)).astype(F32)
    x[:, 2] += 50  # one row of every sample reaches exp(60): 1e26
    got, want = _cvm_and_float(model, {"x": x})
    assert _rel_l2(got, want) < 0.01


def test_round_and_floor_keep_ties_and_integers():
    x = np.array([[0.1, 0.5, 0.9, 1.2, 1.5, 1.8, 2.3, 2.5, 2.7, -1.1, -1.5, -1.9, -2.2, -2.5, -2.8]], F32)
    for op in ("Round", "Floor", "Ceil"):
        model = build_model([helper.make_node(op, ["x"], ["y"], name="r")], {"x": (15,)}, ["y"])
        got, want = _cvm_and_float(model, {"x": x})
        np.testing.assert_allclose(got, want, atol=1e-3, err_msg=op)


def test_floor_ceil_of_random_activations(rng):
    x = rng.standard_normal((8, 3, 4, 5)).astype(F32) * 2
    for op in ("Floor", "Ceil"):
        model = build_model([helper.make_node(op, ["x"], ["y"], name="r")], {"x": (3, 4, 5)}, ["y"])
        got, want = _cvm_and_float(model, {"x": x})
        assert np.mean(np.abs(got - want) > 0.5) < 0.04, op  # values within half an 8-bit input step of an integer


def test_variance_written_out_squares_exactly(rng):
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], name="mean", axes=[2, 3]),
             helper.make_node("Pow", ["x", "two"], ["x2"], name="sq"),
             helper.make_node("ReduceMean", ["x2"], ["ex2"], name="ex2", axes=[2, 3]),
             helper.make_node("Mul", ["m", "m"], ["m2"], name="m2"),
             helper.make_node("Sub", ["ex2", "m2"], ["y"], name="var")]
    model = build_model(nodes, {"x": (3, 6, 6)}, ["y"], {"two": np.array(2.0, F32)})
    x = (rng.standard_normal((16, 3, 6, 6)) * 0.5 + 1.0).astype(F32)  # mean 1, variance 0.25: E[x^2] cancels
    got, want = _cvm_and_float(model, {"x": x})
    assert _rel_l2(got, want) < 0.03
