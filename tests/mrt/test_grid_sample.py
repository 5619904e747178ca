"""GridSample with a grid computed from the input (mrt.onnx_import.ops_grid_sample): per-axis pixel weights as
tables, multiplied into one matrix, times the image; compared with onnxruntime's float run."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

from mrt import pipeline

RNG = np.random.default_rng(11)


def _model(mode, padding_mode, align_corners):
    nodes = [helper.make_node("Tanh", ["g"], ["grid"]),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding_mode,
                              align_corners=align_corners)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 5]),
                                           helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 3, 3, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 3, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("mode, padding_mode, align_corners", [("linear", "zeros", 0), ("nearest", "border", 1),
                                                               ("cubic", "reflection", 0)])
def test_a_computed_grid_samples_like_onnxruntime(mode, padding_mode, align_corners):
    model = _model(mode, padding_mode, align_corners)
    feeds = {"x": RNG.normal(size=(16, 2, 4, 5)).astype(np.float32),
             "g": RNG.normal(0, 1.2, size=(16, 3, 3, 2)).astype(np.float32)}
    m = pipeline.convert(model, feeds, progress=False)
    got = m.dequantize_output(m.run({s.name: m.quantize_input(feeds[s.name], s.name) for s in m.inputs},
                                    backend="reference"), m.outputs[0].name)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = np.concatenate([session.run(None, {k: v[i:i + 1] for k, v in feeds.items()})[0] for i in range(16)])
    cosine = float(np.sum(got * want) / np.linalg.norm(got) / np.linalg.norm(want))
    assert got.shape == want.shape and cosine > 0.99
