"""A per-feature affine map in front of a tree ensemble (Scaler, skl2onnx's MinMaxScaler Mul/Add) folded
into the thresholds (mrt.trees.scaler_fold): the folded splits on the raw float32 input take the same
branch as onnxruntime's float32 scaled comparison for every input, the boundaries themselves included,
and scikit-learn pipelines convert with the float model's decision on every test sample."""
import numpy as np
import pytest

from mrt.trees.ensemble import Ensemble, leaf_index
from mrt.trees.scaler_fold import fold, scaled


def _chains(rng, trees=60, nodes=7, features=4):
    """Trees that are chains (split n: left to leaf n, right to split n + 1): every split is reachable."""
    shape = (trees, nodes)
    left = -(np.arange(nodes) + 1)[None].repeat(trees, 0)
    right = np.arange(1, nodes + 1)[None].repeat(trees, 0)
    right[:, -1] = -(nodes + 1)
    return Ensemble(rng.integers(0, features, shape), rng.normal(0, 2, shape).astype(np.float32),
                    rng.integers(0, 2, shape), left, right, np.zeros((trees, nodes + 1, 1), np.float32),
                    np.zeros(1, np.float32))


@pytest.mark.parametrize("steps", [
    [("sub", [0.3, -1e3, 0.0, 5.0]), ("mul", [1.7, -0.013, 0.0, -3e5])],          # Scaler, all signs
    [("mul", [0.5, -2.0, 1e-30, 3.0]), ("add", [-1.0, 0.25, 7.0, 0.0])],          # MinMaxScaler's form
    [("div", [3.0, -7.0, 1e-3, 2.0]), ("sub", [1.0, 1.0, 1.0, 1.0])],
])
def test_fold_takes_every_branch_of_the_scaled_model(steps):
    rng = np.random.default_rng(0)
    ens = _chains(rng)
    steps = [(op, np.asarray(c, np.float32)) for op, c in steps]
    folded = fold(ens, steps)
    x = np.concatenate([rng.normal(0, 3, (20000, 4)), rng.normal(0, 1e4, (2000, 4))]).astype(np.float32)
    t = folded.threshold.ravel()[:, None].repeat(4, axis=1)
    with np.errstate(over="ignore"):
        edges = [t, np.nextafter(t, np.float32(np.inf)), np.nextafter(t, np.float32(-np.inf))]
    x = np.concatenate([x, *edges]).astype(np.float32)
    x = x[np.isfinite(x).all(axis=1)]
    assert np.array_equal(leaf_index(scaled(x, steps), *ens.constants()[:5]),
                          leaf_index(x, *folded.constants()[:5]))


@pytest.mark.parametrize("data,scaler", [("cancer", "standard"), ("wine", "minmax"), ("digits", "standard")])
def test_scaled_pipeline_converts_with_float_decisions(data, scaler):
    ort = pytest.importorskip("onnxruntime")
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    from mrt.pipeline import convert
    from mrt.trees.datasets import split

    xtr, xte, ytr, _ = split(data)
    est = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0)
    m = make_pipeline({"standard": StandardScaler, "minmax": MinMaxScaler}[scaler](), est).fit(xtr, ytr)
    onx = skl2onnx.to_onnx(m, xtr[:1], options={type(est): {"zipmap": False}},
                           target_opset={"": 17, "ai.onnx.ml": 3})
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, _ = sess.run(None, {sess.get_inputs()[0].name: xte})
    model = convert(onx, xtr, progress=False)
    assert model.graph.opset == 1 and [n.op for n in model.graph.nodes].count("lut") == 0
    y = model.dequantize_output(model.run(model.quantize_input(xte))).reshape(len(xte), -1)
    assert (np.asarray(m.classes_)[y.argmax(1)] == label).all()


def test_two_ensembles_on_one_scaler_share_the_fold():
    """A Scaler read by two tree ensembles (their outputs added): both read the raw input, folded alike."""
    ort = pytest.importorskip("onnxruntime")
    skl2onnx = pytest.importorskip("skl2onnx")
    from onnx import helper
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from mrt.onnx_import import import_onnx
    from mrt.pipeline import convert
    from mrt.trees.datasets import split

    xtr, xte, ytr, _ = split("diabetes")
    m = make_pipeline(StandardScaler(), GradientBoostingRegressor(n_estimators=5, max_depth=2, random_state=0))
    onx = skl2onnx.to_onnx(m.fit(xtr, ytr), xtr[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    g = onx.graph
    tree = next(n for n in g.node if n.op_type == "TreeEnsembleRegressor")
    twin = helper.make_node(tree.op_type, list(tree.input), ["twin"], domain=tree.domain, name="twin")
    twin.attribute.extend(tree.attribute)
    out = g.output[0].name
    for n in g.node:   # the first ensemble now writes `first`; the graph output is first + twin
        n.output[:] = ["first" if o == out else o for o in n.output]
    g.node.extend([twin, helper.make_node("Add", ["first", "twin"], [out])])
    graph = import_onnx(onx)
    assert [n.op for n in graph.nodes].count("tree_ensemble") == 2
    assert all(n.inputs[0] == graph.inputs[0].name for n in graph.nodes if n.op == "tree_ensemble")
    sess = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: xte})[0].reshape(len(xte), -1)
    model = convert(onx, xtr, progress=False)
    y = model.dequantize_output(model.run(model.quantize_input(xte))).reshape(ref.shape)
    assert np.abs(y - ref).max() < 0.01 * np.abs(ref).max()
