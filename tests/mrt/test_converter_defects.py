"""Issue 30, converter defects: tiny ONNX models (onnx.helper) that failed to convert, each converted through
mrt.convert, run on CVM's reference interpreter and compared with onnxruntime's float output.

* A 1-D AveragePool (and MaxPool) became a conv2d / max_pool2d with one stride, which the verifier refused
  (`strides must be 2 ints`): mrt.passes.pool1d_as_2d makes them height-1 2-D pools; a 3-D pool is refused
  naming its node.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import mrt.pipeline as pipeline
from mrt.quantize import QuantizeError

from conftest import build_model, ort_run

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


def test_3d_pool_is_refused_naming_the_node(rng):
    model = build_model([helper.make_node("MaxPool", ["x"], ["y"], name="pool3d", kernel_shape=[2, 2, 2])],
                        {"x": (2, 4, 4, 4)}, ["y"])
    with pytest.raises(QuantizeError, match="'pool3d'.*3 spatial axes"):
        pipeline.convert(model, rng.standard_normal((32, 2, 4, 4, 4)).astype(np.float32), progress=False)
