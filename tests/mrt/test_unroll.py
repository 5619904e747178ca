"""Scan and Loop of a fixed iteration count import unrolled (mrt.onnx_import.unroll): converted end to end and
compared with onnxruntime's float run; loops whose count the input decides, or too large, are refused in one line."""
import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from mrt import pipeline
from mrt.errors import UnsupportedOp
from mrt.onnx_import import import_onnx, unroll

RNG = np.random.default_rng(11)
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _float(model, feeds):
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _cosine(a, b):
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _converted(model, x, run_on=None):
    """Every output of the model converted with the calibration batch x (one sample per row), run on `run_on`
    (x where None), one row per sample."""
    m = pipeline.convert(model, x, softmax="integer", progress=False)
    x = x if run_on is None else run_on
    y = m.run(m.quantize_input(x, m.inputs[0].name), backend="reference")
    y = y if isinstance(y, dict) else {m.outputs[0].name: y}
    return [m.dequantize_output(y[s.name], s.name).reshape(len(x), -1) for s in m.outputs]


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _running_sum(direction=0):
    """y = 0.5 + x's rows summed, z = the running sums (from the end where direction is 1), for x of ONNX shape
    (1, 5, 3) scanned along axis 1."""
    body = helper.make_graph([helper.make_node("Add", ["s_in", "row"], ["s_out"]),
                              helper.make_node("Identity", ["s_out"], ["z_row"])], "body",
                             [_vi("s_in", F, [1, 3]), _vi("row", F, [1, 3])], [_vi("s_out", F, [1, 3]), _vi("z_row", F, [1, 3])])
    scan = helper.make_node("Scan", ["init", "x"], ["y", "z"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[direction],
                            scan_output_axes=[1], scan_output_directions=[direction])
    init = numpy_helper.from_array(np.full((1, 3), 0.5, np.float32), "init")
    return _model([scan], [_vi("x", F, [1, 5, 3])], [_vi("y", F, [1, 3]), _vi("z", F, [1, 5, 3])], [init])


@pytest.mark.parametrize("direction", [0, 1])
def test_scan_running_sum(direction):
    model = _running_sum(direction)
    x = RNG.normal(size=(32, 5, 3)).astype(np.float32)
    y, z = _converted(model, x)
    want = [np.concatenate(w) for w in zip(*(_float(model, {"x": x[b:b + 1]}) for b in range(len(x))))]
    assert _cosine(y, want[0]) > 0.999 and _cosine(z, want[1]) > 0.999


def test_scan_pairwise_distances_to_a_constant_training_set():
    """skl2onnx's k-nearest-neighbours pattern: the queries a state the body passes through, the training rows the
    scanned input, the squared distances the scan output."""
    train = RNG.normal(size=(20, 4)).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("Identity", ["q_in"], ["q_out"]), helper.make_node("Sub", ["q_in", "row"], ["d"]),
         helper.make_node("ReduceSumSquare", ["d", "axes"], ["dist"], keepdims=0)], "cdist",
        [_vi("q_in", F, [None, 4]), _vi("row", F, [4])], [_vi("q_out", F, [None, 4]), _vi("dist", F, [None])],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    nodes = [helper.make_node("Scan", ["x", "train"], ["xs", "d2"], body=body, num_scan_inputs=1),
             helper.make_node("Transpose", ["d2"], ["d2t"], perm=[1, 0]), helper.make_node("Sqrt", ["d2t"], ["y"])]
    model = _model(nodes, [_vi("x", F, [None, 4])], [_vi("y", F, [None, 20])], [numpy_helper.from_array(train, "train")],
                   opset=18)
    x = RNG.normal(size=(64, 4)).astype(np.float32)
    got, = _converted(model, x)
    want = _float(model, {"x": x})[0]
    assert _cosine(got, want) > 0.999
    assert np.mean(got.argmin(1) == want.argmin(1)) > 0.9  # the nearest neighbour found as in float


def test_skl2onnx_nearest_neighbour_distances():
    """The distances of a real skl2onnx KNeighborsClassifier (its graph up to the Sqrt after the Scan; its TopK is
    another op's business), on iris."""
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.datasets import load_iris
    from sklearn.neighbors import KNeighborsClassifier
    x, labels = load_iris(return_X_y=True)
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    onx = skl2onnx.to_onnx(KNeighborsClassifier(3).fit(x[::2], labels[::2]), x[:1], options={"zipmap": False},
                           target_opset={"": 17, "ai.onnx.ml": 3})
    nodes = list(onx.graph.node)
    cut = next(k for k, n in enumerate(nodes) if n.op_type == "Sqrt")
    del onx.graph.node[cut + 1:], onx.graph.output[:]
    onx.graph.output.append(_vi(nodes[cut].output[0], F, None))
    got, = _converted(onx, x[::2], run_on=x[1::2])  # calibrated on the training rows, run on the others
    assert _cosine(got, _float(onx, {"X": x[1::2]})[0]) > 0.999


def _accumulating_loop(trip, stop_at=None):
    """acc = x + 1 + 2 + ... per iteration (the iteration number cast to float), every acc kept as a scan output;
    with `stop_at` the condition turns false once the iteration number reaches it."""
    cond = [helper.make_node("Identity", ["c_in"], ["c_out"])] if stop_at is None else [
        helper.make_node("Less", ["i", "stop"], ["c_out"])]
    body = helper.make_graph(
        [*cond, helper.make_node("Cast", ["i"], ["i_f"], to=F), helper.make_node("Add", ["a_in", "i_f"], ["a_out"]),
         helper.make_node("Mul", ["a_out", "half"], ["seen"])], "body",
        [_vi("i", I64, []), _vi("c_in", B, []), _vi("a_in", F, [1, 4])],
        [_vi("c_out", B, []), _vi("a_out", F, [1, 4]), _vi("seen", F, [1, 4])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half"),
         numpy_helper.from_array(np.array(stop_at or 0, np.int64), "stop")])
    loop = helper.make_node("Loop", ["trip", "go", "x"], ["acc", "all"], body=body)
    inits = [numpy_helper.from_array(np.array(trip, np.int64), "trip"), numpy_helper.from_array(np.array(True), "go")]
    return _model([loop], [_vi("x", F, [1, 4])], [_vi("acc", F, [1, 4]), _vi("all", F, None)], inits)


@pytest.mark.parametrize("trip, stop_at, iterations", [(5, None, 5), (10, 3, 4)])
def test_loop_of_a_fixed_count_accumulates(trip, stop_at, iterations):
    model = _accumulating_loop(trip, stop_at)
    x = RNG.normal(size=(32, 4)).astype(np.float32)
    acc, seen = _converted(model, x)
    want = [_float(model, {"x": x[b:b + 1]}) for b in range(len(x))]
    assert want[0][1].shape == (iterations, 1, 4) and seen.shape == (32, iterations * 4)
    assert _cosine(acc, np.concatenate([w[0] for w in want])) > 0.999
    assert _cosine(seen, np.stack([w[1].ravel() for w in want])) > 0.999


def test_a_loop_inside_a_scan_body_and_an_outer_scope_read():
    """A Loop nested in a Scan's body, reading the graph's weight w by name: unrolled in turn (y = mean of x's rows
    + every row + 2 w per row)."""
    w = numpy_helper.from_array(RNG.normal(size=(3,)).astype(np.float32), "w")
    inner = helper.make_graph([helper.make_node("Identity", ["ci"], ["co"]), helper.make_node("Add", ["v_in", "w"], ["v_out"])],
                              "inner", [_vi("j", I64, []), _vi("ci", B, []), _vi("v_in", F, [1, 3])],
                              [_vi("co", B, []), _vi("v_out", F, [1, 3])])
    body = helper.make_graph([helper.make_node("Loop", ["two", "", "row"], ["twice"], body=inner),
                              helper.make_node("Add", ["s_in", "twice"], ["s_out"])], "body",
                             [_vi("s_in", F, [1, 3]), _vi("row", F, [1, 3])], [_vi("s_out", F, [1, 3])],
                             [numpy_helper.from_array(np.array(2, np.int64), "two")])
    nodes = [helper.make_node("ReduceMean", ["x"], ["x0"], axes=[1], keepdims=0),
             helper.make_node("Scan", ["x0", "x"], ["y"], body=body, num_scan_inputs=1, scan_input_axes=[1])]
    model = _model(nodes, [_vi("x", F, [1, 4, 3])], [_vi("y", F, [1, 3])], [w])
    x = RNG.normal(size=(16, 4, 3)).astype(np.float32)
    got, = _converted(model, x)
    want = np.concatenate([_float(model, {"x": x[b:b + 1]})[0] for b in range(len(x))])
    assert _cosine(got, want) > 0.999


def test_an_if_inside_a_scan_body_takes_its_constant_branch():
    model = _running_sum()
    body = model.graph.node[0].attribute[0].g
    branch = {k: helper.make_graph([helper.make_node(op, ["s_in", "row"], [f"{k}_sum"])], k, [],
                                   [_vi(f"{k}_sum", F, [1, 3])]) for k, op in (("then", "Sub"), ("else", "Add"))}
    body.node[0].CopyFrom(helper.make_node("If", ["flag"], ["s_out"], then_branch=branch["then"],
                                           else_branch=branch["else"]))
    body.initializer.append(numpy_helper.from_array(np.array(False), "flag"))
    x = RNG.normal(size=(32, 5, 3)).astype(np.float32)
    y, z = _converted(model, x)
    assert _cosine(y, 0.5 + x.sum(1)) > 0.999 and _cosine(z, 0.5 + np.cumsum(x, 1).reshape(32, -1)) > 0.999


def test_a_trip_count_from_the_input_is_refused():
    model = _accumulating_loop(3)
    model.graph.initializer.pop(0)  # trip: now a graph input
    model.graph.input.append(_vi("trip", I64, []))
    with pytest.raises(UnsupportedOp, match="Loop trip count .* must be a constant"):
        import_onnx(model)


def test_a_condition_computed_from_the_input_is_refused():
    model = _accumulating_loop(3)
    body = model.graph.node[0].attribute[0].g
    body.node[0].CopyFrom(helper.make_node("ReduceMax", ["a_in"], ["m"], keepdims=0))
    body.node.insert(1, helper.make_node("Less", ["m", "half"], ["c_out"]))
    with pytest.raises(UnsupportedOp, match="condition for iteration 1 .* computed from the input"):
        import_onnx(model)


def test_an_unrolling_past_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(unroll, "MAX_ITERATIONS", 4)
    with pytest.raises(UnsupportedOp, match="Scan node 'y': unrolling 5 iterations .* passes the limit"):
        import_onnx(_running_sum())
