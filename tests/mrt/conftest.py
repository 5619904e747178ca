"""Shared helpers for MRT tests: build small ONNX models with onnx.helper (no torch needed) and
run them with onnxruntime as the reference."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

ONNX_OPSET = 17
IR_VERSION = 8  # what the installed onnxruntime reads


def build_model(nodes, inputs, outputs, initializers=None, opset=ONNX_OPSET, ml=False):
    """inputs: {name: per-sample shape} (batch dim symbolic); outputs: names;
    initializers: {name: array}."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *s]) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()])
    opsets = [helper.make_opsetid("", opset)]
    if ml:
        opsets.append(helper.make_opsetid("ai.onnx.ml", 1))
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=opsets)


def ort_run(model, feeds):
    """{output name: array} from onnxruntime."""
    import onnxruntime as ort
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def onnx_model():
    return build_model


@pytest.fixture
def ort():
    return ort_run
