"""The float executor's fast paths (conv as im2col + GEMM in blocks of samples, depthwise conv, dense in
row blocks, pools as one pass per kernel position) against onnxruntime and against the direct float64
definitions they replaced; and run_float's liveness: a value is freed after its last reader."""
import numpy as np
import pytest
from onnx import helper

from mrt.float_exec import run_float
from mrt.float_ops import linear, pool
from mrt.onnx_import import import_onnx


def _conv_direct(x, w, b, strides, pads, dilations, groups):
    """The definition: float64 sums over every input channel of the group and kernel position."""
    nd = w.ndim - 2
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    out = [(xp.shape[2 + i] - dilations[i] * (w.shape[2 + i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    og, cg = w.shape[0] // groups, w.shape[1]
    y = np.zeros((x.shape[0], w.shape[0], *out))
    for o in range(w.shape[0]):
        g = o // og
        for pos in np.ndindex(*w.shape[2:]):
            sl = tuple(slice(pos[i] * dilations[i], pos[i] * dilations[i] + (out[i] - 1) * strides[i] + 1, strides[i])
                       for i in range(nd))
            y[:, o] += np.tensordot(xp[(slice(None), slice(g * cg, (g + 1) * cg), *sl)],
                                    w[(o, slice(None), *pos)].astype(np.float64), axes=([1], [0]))
    return (y + (0 if b is None else b.astype(np.float64).reshape(-1, *[1] * nd))).astype(np.float32)


CONVS = {  # name: (x shape, w shape, strides, pads, dilations, groups, bias)
    "3x3 pad 1": ((5, 6, 9, 8), (7, 6, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    "7x7 stride 2 asym pads": ((3, 3, 17, 15), (8, 3, 7, 7), (2, 2), (3, 2, 1, 3), (1, 1), 1, False),
    "dilated strided": ((4, 4, 13, 14), (6, 4, 3, 2), (2, 3), (0, 1, 2, 0), (2, 3), 1, True),
    "grouped": ((3, 8, 10, 10), (12, 2, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4, True),
    "depthwise": ((6, 5, 11, 9), (5, 1, 3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 5, True),
    "depthwise x2 multiplier": ((2, 4, 8, 8), (8, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 4, False),
    "1x1": ((4, 16, 7, 7), (32, 16, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    "1-d": ((3, 4, 20), (5, 4, 3), (2,), (1, 1), (1,), 1, True),
    "3-d": ((2, 3, 5, 6, 4), (4, 3, 2, 3, 2), (1, 2, 1), (0, 1, 1, 1, 0, 0), (1, 1, 2), 1, True),
}


@pytest.mark.parametrize("block", [linear.BLOCK, 1, 500])  # whole batches, one sample, a few samples
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv_matches_the_direct_definition(name, block, rng, monkeypatch):
    xs, ws, strides, pads, dilations, groups, has_bias = CONVS[name]
    x, w = rng.standard_normal(xs, np.float32), rng.standard_normal(ws, np.float32)
    b = rng.standard_normal(ws[0], np.float32) if has_bias else None
    monkeypatch.setattr(linear, "BLOCK", block)
    got = linear.conv(x, w, b, strides=strides, pads=pads, dilations=dilations, groups=groups)
    want = _conv_direct(x, w, b, strides, pads, dilations, groups)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_depthwise_is_the_direct_definition_bit_for_bit(rng):
    """Products of float32 are exact in float64, and the depthwise path adds them in kernel order."""
    x, w, b = rng.standard_normal((3, 4, 9, 9), np.float32), rng.standard_normal((4, 1, 3, 3), np.float32), None
    got = linear.conv(x, w, b, strides=(1, 1), pads=(1, 1, 1, 1), dilations=(1, 1), groups=4)
    assert np.array_equal(got, _conv_direct(x, w, b, (1, 1), (1, 1, 1, 1), (1, 1), 4))


@pytest.mark.parametrize("name", ["3x3 pad 1", "grouped", "depthwise", "dilated strided", "1-d"])
def test_conv_matches_onnxruntime(name, onnx_model, ort, rng):
    xs, ws, strides, pads, dilations, groups, has_bias = CONVS[name]
    inits = {"w": rng.standard_normal(ws, np.float32)}
    if has_bias:
        inits["b"] = rng.standard_normal(ws[0], np.float32)
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if has_bias else []), ["y"], strides=list(strides),
                            pads=list(pads), dilations=list(dilations), group=groups)
    model = onnx_model([node], {"x": xs[1:]}, ["y"], inits)
    x = rng.standard_normal(xs, np.float32)
    np.testing.assert_allclose(run_float(import_onnx(model), x)["y"], ort(model, {"x": x})["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op, attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[2, 3], strides=[1, 2], dilations=[2, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
])
def test_pools_match_onnxruntime(op, attrs, onnx_model, ort, rng):
    model = onnx_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": (3, 11, 10)}, ["y"])
    x = rng.standard_normal((4, 3, 11, 10), np.float32)
    np.testing.assert_allclose(run_float(import_onnx(model), x)["y"], ort(model, {"x": x})["y"], rtol=1e-5, atol=1e-6)


def test_pools_are_the_window_definitions(rng):
    x = rng.standard_normal((2, 3, 9, 8), np.float32)
    geo = dict(kernel=(3, 2), strides=(2, 1), pads=(1, 0, 1, 1), dilations=(1, 2))
    from mrt.float_ops.window import kernel_axes, pad_spatial, windows
    view = windows(pad_spatial(x, geo["pads"], -np.inf), geo["kernel"], geo["strides"], geo["dilations"])
    assert np.array_equal(pool.max_pool(x, **geo), view.max(axis=kernel_axes(2)))
    view = windows(pad_spatial(x.astype(np.float64), geo["pads"], 0), geo["kernel"], geo["strides"], geo["dilations"])
    np.testing.assert_array_equal(pool.sum_pool(x, **geo), view.sum(axis=kernel_axes(2)).astype(np.float32))


@pytest.mark.parametrize("block", [linear.BLOCK, 7, 1])
def test_dense_in_row_blocks_is_one_gemm(block, rng, monkeypatch):
    x, w, b = rng.standard_normal((5, 33), np.float32), rng.standard_normal((10, 33), np.float32), rng.standard_normal(10, np.float32)
    want = (x.astype(np.float64) @ w.T.astype(np.float64) + b).astype(np.float32)
    monkeypatch.setattr(linear, "BLOCK", block)
    np.testing.assert_allclose(linear.dense(x, w, b), want, rtol=1e-7, atol=1e-7)


def _chain(onnx_model, n):
    nodes = [helper.make_node("Relu" if k % 2 else "Neg", [f"t{k}"], [f"t{k + 1}"]) for k in range(n)]
    nodes[0].input[0] = "x"
    nodes.append(helper.make_node("Add", [f"t{n}", "t1"], ["y"]))  # t1 stays live to the end
    return import_onnx(onnx_model(nodes, {"x": (1 << 18,)}, ["y"]))


def test_run_float_holds_only_live_values(onnx_model, rng):
    """observe sees the input and every node output once, in order; without capture a run's peak
    memory is a few live tensors however long the chain (tracemalloc sees numpy's buffers)."""
    import tracemalloc
    graph = _chain(onnx_model, 24)
    x = rng.standard_normal((4, 1 << 18), np.float32)
    seen = []
    peaks = {}
    for capture in (False, True):
        tracemalloc.start()
        run_float(graph, x, capture=capture, observe=None if capture else (lambda name, v: seen.append(name)))
        peaks[capture] = tracemalloc.get_traced_memory()[1] / x.nbytes
        tracemalloc.stop()
    assert seen == ["x"] + [n.outputs[0] for n in graph.nodes]
    assert peaks[False] < 8 < 20 < peaks[True]  # live: t1, the node's input and output, op temporaries
