"""Every rewrite pass keeps the float outputs (within float tolerance) on random inputs, and does
the rewrite it promises, on small hand-built ONNX graphs."""
import math

import numpy as np
import pytest
from onnx import helper

from mrt.float_exec import run_float
from mrt.graph import Graph, Node, TensorSpec
from mrt.onnx_import import import_onnx
from mrt.passes import (DEFAULT_PIPELINE, fold_batchnorm, fold_constants, remove_identity,
                        rewrite_avg_pool, rewrite_global_avg_pool, run_pipeline)

N = helper.make_node


def f32(a):
    return np.asarray(a, dtype=np.float32)


def check_same(before, after, rng, batch=5):
    """The two graphs compute the same outputs on a random batch."""
    feeds = {s.name: f32(rng.standard_normal((batch, *s.shape))) for s in before.inputs}
    want, got = run_float(before, feeds), run_float(after, feeds)
    assert list(want) == list(got)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)


def ops(graph):
    return [n.op for n in graph.nodes]


def bn_params(rng, c, prefix):
    return {f"{prefix}_s": f32(rng.uniform(0.5, 2, c)), f"{prefix}_b": f32(rng.standard_normal(c)),
            f"{prefix}_m": f32(rng.standard_normal(c)), f"{prefix}_v": f32(rng.uniform(0.5, 2, c))}


def bn(x, y, prefix, eps=1e-3):
    return N("BatchNormalization", [x, *(f"{prefix}_{k}" for k in "sbmv")], [y], epsilon=eps)


# -- fold_batchnorm ---------------------------------------------------------------------------

def test_fold_batchnorm_into_conv_and_dense(onnx_model, rng):
    inits = {"w": f32(rng.standard_normal((4, 3, 3, 3))), "cb": f32(rng.standard_normal(4)),
             "w2": f32(rng.standard_normal((4 * 6 * 6, 5))),
             **bn_params(rng, 4, "bn1"), **bn_params(rng, 5, "bn2")}
    model = onnx_model([
        N("Conv", ["x", "w", "cb"], ["c"]), bn("c", "c_bn", "bn1"), N("Relu", ["c_bn"], ["r"]),
        N("Flatten", ["r"], ["f"]), N("Gemm", ["f", "w2"], ["d"]), bn("d", "y", "bn2"),
    ], {"x": (3, 8, 8)}, ["y"], inits)
    g = import_onnx(model)
    folded = fold_batchnorm(g)
    assert ops(folded) == ["conv", "relu", "flatten", "dense"]
    assert folded.outputs == ("y",)
    check_same(g, folded, rng)


def test_fold_batchnorm_elsewhere_becomes_mul_add(onnx_model, rng):
    """BN after a relu, and after a conv whose output has a second reader, is a per-channel
    mul + add."""
    inits = {"w": f32(rng.standard_normal((4, 3, 1, 1))), **bn_params(rng, 3, "bn1"),
             **bn_params(rng, 4, "bn2")}
    model = onnx_model([
        N("Relu", ["x"], ["r"]), bn("r", "a", "bn1"),
        N("Conv", ["a", "w"], ["c"]), bn("c", "c_bn", "bn2"), N("Add", ["c", "c_bn"], ["y"]),
    ], {"x": (3, 5, 5)}, ["y"], inits)
    g = import_onnx(model)
    folded = fold_batchnorm(g)
    assert ops(folded) == ["relu", "mul", "add", "conv", "mul", "add", "add"]
    assert folded.initializers[folded.nodes[1].inputs[1]].shape == (3, 1, 1)
    check_same(g, folded, rng)


# -- fold_constants ---------------------------------------------------------------------------

def test_fold_constants_scale_and_shift_into_conv(onnx_model, rng):
    inits = {"w": f32(rng.standard_normal((4, 2, 3, 3))), "b": f32(rng.standard_normal(4)),
             "k": f32(rng.uniform(0.5, 2, (1, 4, 1, 1))), "two": f32(2.0),
             "t": f32(rng.standard_normal((4, 1, 1))), "s": f32(0.25)}
    model = onnx_model([
        N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Mul", ["k", "c"], ["m"]),
        N("Div", ["m", "two"], ["d"]), N("Add", ["d", "t"], ["a"]), N("Sub", ["a", "s"], ["y"]),
    ], {"x": (2, 6, 6)}, ["y"], inits)
    g = import_onnx(model)
    folded = fold_constants(g)
    assert ops(folded) == ["conv"] and folded.outputs == ("y",)
    check_same(g, folded, rng)


def test_fold_constants_into_dense_without_bias(onnx_model, rng):
    """torch's Linear on 3-D input exports MatMul + Add: the Add becomes the dense bias."""
    inits = {"w": f32(rng.standard_normal((6, 3))), "b": f32(rng.standard_normal(3)),
             "k": f32(rng.uniform(0.5, 2, 3))}
    model = onnx_model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["a"]),
                        N("Mul", ["a", "k"], ["y"])], {"x": (4, 6)}, ["y"], inits)
    g = import_onnx(model)
    assert ops(g) == ["dense", "add", "mul"]
    folded = fold_constants(g)
    assert ops(folded) == ["dense"] and len(folded.nodes[0].inputs) == 3
    check_same(g, folded, rng)


def test_fold_constants_leaves_what_is_not_per_channel(onnx_model, rng):
    """A spatially varying constant, c - x, and a conv output with two readers stay as they are."""
    inits = {"w": f32(rng.standard_normal((2, 2, 1, 1))), "sp": f32(rng.standard_normal((4, 4))),
             "one": f32(1.0)}
    model = onnx_model([
        N("Conv", ["x", "w"], ["c"]), N("Mul", ["c", "sp"], ["m"]),
        N("Conv", ["m", "w"], ["c2"]), N("Sub", ["one", "c2"], ["s"]),
        N("Conv", ["s", "w"], ["c3"]), N("Mul", ["c3", "one"], ["m3"]),
        N("Add", ["c3", "m3"], ["y"]),
    ], {"x": (2, 4, 4)}, ["y"], inits)
    g = import_onnx(model)
    assert ops(fold_constants(g)) == ops(g)


def test_fold_constants_evaluates_constant_nodes(rng):
    """A node reading only constants (here a weight scaled by a constant) becomes a constant."""
    w, k = f32(rng.standard_normal((3, 4))), f32(0.5)
    g = Graph(inputs=[TensorSpec("x", (4,))], outputs=["y"],
              initializers={"w": w, "k": k},
              nodes=[Node("mul", ("w", "k"), ("w2",), {}, "scale_w"),
                     Node("dense", ("x", "w2"), ("y",), {}, "fc")])
    assert "w2" not in g.shapes  # a constant-valued tensor has no batch axis
    folded = fold_constants(g)
    assert ops(folded) == ["dense"]
    np.testing.assert_allclose(folded.initializers["w2"], w * k)
    check_same(g, folded, rng)


# -- rewrite_global_avg_pool / rewrite_avg_pool ------------------------------------------------

def test_rewrite_global_avg_pool(onnx_model, rng):
    model = onnx_model([N("GlobalAveragePool", ["x"], ["y"])], {"x": (3, 5, 7)}, ["y"])
    g = import_onnx(model)
    rewritten = rewrite_global_avg_pool(g)
    assert ops(rewritten) == ["sum", "mul"]
    total, mul = rewritten.nodes
    assert total.attrs == {"axes": (2, 3), "keepdims": True}
    assert rewritten.initializers[mul.inputs[1]] == np.float32(1 / 35)
    check_same(g, rewritten, rng)


AVG_POOLS = {
    "no_pad": dict(kernel_shape=[2, 2], strides=[2, 2]),
    "pad_excluded": dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "pad_counted": dict(kernel_shape=[3, 3], pads=[1, 0, 1, 2], count_include_pad=1),
    "ceil": dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    "ceil_pad_counted": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
                             count_include_pad=1),
    "dilated_1d": dict(kernel_shape=[2], dilations=[2], strides=[1]),
}


@pytest.mark.parametrize("case", sorted(AVG_POOLS))
def test_rewrite_avg_pool(case, onnx_model, ort, rng):
    attrs = AVG_POOLS[case]
    shape = (2, 9) if len(attrs["kernel_shape"]) == 1 else (2, 6, 7)
    model = onnx_model([N("AveragePool", ["x"], ["y"], **attrs)], {"x": shape}, ["y"],
                       opset=19)
    g = import_onnx(model)
    rewritten = rewrite_avg_pool(g)
    assert ops(rewritten) == ["sum_pool", "mul"]
    inv = rewritten.initializers[rewritten.nodes[1].inputs[1]]
    uniform = case in ("no_pad", "pad_counted", "dilated_1d")
    assert (inv.shape == ()) == uniform
    check_same(g, rewritten, rng)
    x = f32(rng.standard_normal((3, *shape)))
    np.testing.assert_allclose(run_float(rewritten, x)["y"], ort(model, {"x": x})["y"],
                               rtol=1e-5, atol=1e-6)


# -- remove_identity ---------------------------------------------------------------------------

def test_remove_identity_keeps_output_names(onnx_model, rng):
    model = onnx_model([
        N("Identity", ["x"], ["i"]), N("Relu", ["i"], ["r"]), N("Dropout", ["r"], ["d"]),
        N("Sigmoid", ["d"], ["s"]), N("Identity", ["s"], ["y"]), N("Identity", ["x"], ["z"]),
    ], {"x": (4,)}, ["y", "z"])
    g = import_onnx(model)
    removed = remove_identity(g)
    assert ops(removed) == ["relu", "sigmoid", "identity"]  # x -> z must keep its node
    assert removed.outputs == ("y", "z") and removed.producer("y").op == "sigmoid"
    check_same(g, removed, rng)


# -- the pipeline ------------------------------------------------------------------------------

def test_default_pipeline_on_a_small_cnn(onnx_model, rng, tmp_path, capsys):
    inits = {"w": f32(rng.standard_normal((4, 3, 3, 3))), **bn_params(rng, 4, "bn"),
             "w2": f32(rng.standard_normal((5, 4))), "b2": f32(rng.standard_normal(5))}
    model = onnx_model([
        N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), bn("c", "cb", "bn"),
        N("Relu", ["cb"], ["r"]), N("Dropout", ["r"], ["dr"]),
        N("AveragePool", ["dr"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        N("GlobalAveragePool", ["p"], ["gp"]), N("Flatten", ["gp"], ["f"]),
        N("Gemm", ["f", "w2", "b2"], ["y"], transB=1),
    ], {"x": (3, 8, 8)}, ["y"], inits)
    g = import_onnx(model)
    seen = []
    out = run_pipeline(g, dump=lambda stage, name, graph: seen.append((stage, name)))
    assert seen == [(0, "input")] + [(k + 1, name) for k, (name, _) in enumerate(DEFAULT_PIPELINE)]
    assert ops(out) == ["conv", "relu", "sum_pool", "mul", "sum", "mul", "flatten", "dense"]
    check_same(g, out, rng)
    run_pipeline(g, dump=tmp_path)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[0] == "00_input.txt"
    assert files[-1] == f"{len(DEFAULT_PIPELINE):02d}_{DEFAULT_PIPELINE[-1][0]}.txt"
    assert "sum_pool" in (tmp_path / files[-1]).read_text()
    run_pipeline(g, passes=DEFAULT_PIPELINE[:1], dump=True)
    assert "== 01 remove_identity" in capsys.readouterr().out


def test_passes_do_not_modify_their_input(onnx_model, rng):
    inits = {"w": f32(rng.standard_normal((2, 2, 1, 1))), **bn_params(rng, 2, "bn")}
    model = onnx_model([N("Conv", ["x", "w"], ["c"]), bn("c", "y", "bn")], {"x": (2, 3, 3)},
                       ["y"], inits)
    g = import_onnx(model)
    before = str(g), {k: v.copy() for k, v in g.initializers.items()}
    run_pipeline(g)
    assert str(g) == before[0]
    assert all(np.array_equal(g.initializers[k], v) for k, v in before[1].items())
    assert math.isfinite(float(run_float(g, f32(np.ones((1, 2, 3, 3))))["y"].sum()))
