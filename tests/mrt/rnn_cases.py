"""ONNX recurrent models built with onnx.helper for the RNN tests: a bare LSTM/GRU/RNN node in either layout, and the
graph torch exports around a batch-first recurrent layer (Transposes to and from the sequence-first layout,
a Shape-built Reshape that merges directions, the last step, a dense head)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import onnxruntime as ort

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OPSET = 14  # layout (batch-first recurrent ops) exists from 14


def _f32(rng, scale, shape):
    return rng.normal(scale=scale, size=shape).astype(np.float32)


def _weights(rng, op, dirs, inputs, hidden, recurrent=0.5):
    """W, R, B; `recurrent` scales R (below about 1/sqrt(hidden) the recurrence contracts, as trained ones do, instead
    of amplifying every perturbation, rounding included)."""
    g = GATES[op] * hidden
    return [numpy_helper.from_array(_f32(rng, 0.5, (dirs, g, inputs)), "W"),
            numpy_helper.from_array(_f32(rng, recurrent, (dirs, g, hidden)), "R"),
            numpy_helper.from_array(_f32(rng, 0.3, (dirs, 2 * g)), "B")]


def cell_model(op, direction="forward", layout=0, states=False, seed=0, steps=5, inputs=3, hidden=4, **attrs):
    """One recurrent node; X, and with `states` the initial states, are graph inputs; every output is a graph output."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    x_dims = ["T", "N", inputs] if layout == 0 else ["N", "T", inputs]
    s_dims = [dirs, "N", hidden] if layout == 0 else ["N", dirs, hidden]
    ins, names = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_dims)], ["x", "W", "R", "B", ""]
    for s in (["h0", "c0"] if op == "LSTM" else ["h0"]) if states else []:
        ins.append(helper.make_tensor_value_info(s, TensorProto.FLOAT, s_dims))
        names.append(s)
    outs = ["Y", "Yh", "Yc"][:3 if op == "LSTM" else 2]
    if layout:
        attrs["layout"] = 1
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction, **attrs)
    graph = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
                              _weights(rng, op, dirs, inputs, hidden))
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", OPSET)])


def feeds_for(model, batch=2, seed=1):
    """Random inputs in the model's own (ONNX) layout: symbolic dims N -> batch, T -> 5."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else batch if d.dim_param == "N" else 5
                for d in vi.type.tensor_type.shape.dim]
        out[vi.name] = rng.normal(size=dims).astype(np.float32)
    return out


def reference(model, feeds):
    """onnxruntime's outputs; onnx's reference evaluator for layout=1, which onnxruntime does not run."""
    if any(a.name == "layout" and a.i for n in model.graph.node for a in n.attribute):
        return ReferenceEvaluator(model).run(None, feeds)
    return ort.InferenceSession(model.SerializeToString()).run(None, feeds)


def torch_like(op="LSTM", direction="forward", steps=12, inputs=3, hidden=16, outputs=2, seed=0):
    """x [N, T, I] -> Transpose -> op (layout 0) -> Y [T, D, N, H] -> Transpose [T, N, D, H] -> Reshape
    [T, N, D*H] (N from Shape) -> Transpose [N, T, D*H] -> last step -> MatMul: what torch.onnx exports for
    nn.LSTM(batch_first=True) and a linear head."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    n = helper.make_node
    nodes = [n("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
             n(op, ["xt", "W", "R", "B"], ["Y", "Yh"] + (["Yc"] if op == "LSTM" else []), hidden_size=hidden,
               direction=direction),
             n("Transpose", ["Y"], ["Yt"], perm=[0, 2, 1, 3]),
             n("Shape", ["Yt"], ["shape"]), n("Gather", ["shape", "one"], ["batch"], axis=0),
             n("Concat", ["steps", "batch", "minus_one"], ["target"], axis=0),
             n("Reshape", ["Yt", "target"], ["Yr"]), n("Transpose", ["Yr"], ["Yb"], perm=[1, 0, 2]),
             n("Gather", ["Yb", "last"], ["h_last"], axis=1), n("MatMul", ["h_last", "Wo"], ["y"])]
    ints = {"one": [1], "steps": [steps], "minus_one": [-1], "last": steps - 1}
    inits = _weights(rng, op, dirs, inputs, hidden, recurrent=0.25) + [
        numpy_helper.from_array(_f32(rng, 0.3, (dirs * hidden, outputs)), "Wo"),
        *(numpy_helper.from_array(np.array(v, np.int64), k) for k, v in ints.items())]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", steps, inputs])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, ir_version=9, opset_imports=[helper.make_opsetid("", OPSET)])
