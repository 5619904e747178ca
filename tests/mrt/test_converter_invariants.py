"""Issue 30, item 3: the converter's invariants, as a property over small random ONNX graphs.

Conversion either gives a model that CVM loads back from its own bytes (the whole verifier) and runs, with the
output's axes onnxruntime gives, or fails with UnsupportedOp, BadInput or QuantizeError on one line naming a
node (mrt.containment). The graphs chain a handful of ops on a (C, H, W) image: Conv, Gemm, MatMul, Add, Mul,
Div by a constant, Relu, Sigmoid, Identity, AveragePool, MaxPool (2-D, and 1-D after a reshape), Reshape,
Flatten, Transpose, Concat; and, one step in twenty, what MRT must refuse (the batch axis transposed or
merged, a division by zero). A few unit tests pin mrt.containment's translations.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

import cvm
import mrt.pipeline as pipeline
from mrt.containment import contained
from mrt.errors import BadInput, GraphError, UnsupportedOp
from mrt.graph import Node
from mrt.quantize import QuantizeError

from conftest import build_model, ort_run

F32 = np.float32
OWN = (UnsupportedOp, BadInput, QuantizeError)


class _Builder:
    """A growing ONNX graph: tensors with their per-sample shapes, nodes, constants."""

    def __init__(self, draw, shape):
        self.draw, self.shapes, self.nodes, self.inits = draw, {"x": shape}, [], {}
        self.rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
        self.done = False

    def const(self, value) -> str:
        name = f"c{len(self.inits)}"
        self.inits[name] = np.asarray(value, F32)
        return name

    def node(self, op, inputs, shape, **attrs) -> str:
        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{len(self.nodes)}", **attrs))
        self.shapes[out] = shape
        return out

    def pick(self, ranks=None) -> str:
        names = [n for n, s in self.shapes.items() if ranks is None or len(s) in ranks]
        return self.draw(st.sampled_from(names)) if names else None


def _window(size, k, s, p):
    return (size + 2 * p - k) // s + 1


def _conv(b, x):
    c, h, w = b.shapes[x]
    k, o, p, s = b.draw(st.sampled_from([1, 3])), b.draw(st.integers(1, 4)), b.draw(st.integers(0, 1)), b.draw(st.integers(1, 2))
    if _window(h, k, s, p) < 1 or _window(w, k, s, p) < 1:
        return None
    wt = b.const(b.rng.standard_normal((o, c, k, k)) / k)
    return b.node("Conv", [x, wt, b.const(b.rng.standard_normal(o) * 0.1)], (o, _window(h, k, s, p), _window(w, k, s, p)),
                  pads=[p] * 4, strides=[s, s])


def _pool(b, x):
    op, spatial = b.draw(st.sampled_from(["AveragePool", "MaxPool"])), b.shapes[x][1:]
    k, s = b.draw(st.integers(1, 2)), b.draw(st.integers(1, 2))
    if min(spatial) < k:
        return None
    out = tuple(_window(d, k, s, 0) for d in spatial)
    return b.node(op, [x], (b.shapes[x][0], *out), kernel_shape=[k] * len(spatial), strides=[s] * len(spatial))


def _elementwise(b, x):
    op, shape = b.draw(st.sampled_from(["Add", "Mul", "Div"])), b.shapes[x]
    same = [n for n, s in b.shapes.items() if s == shape and n != x]
    if op != "Div" and same and b.draw(st.booleans()):
        return b.node(op, [x, b.draw(st.sampled_from(same))], shape)
    vector = b.draw(st.booleans())
    c = b.rng.uniform(0.5, 2, shape[-1] if vector else ()) * b.rng.choice([-1, 1], shape[-1] if vector else ())
    return b.node(op, [x, b.const(c)], shape)


def _dense(b, x):
    k, o = b.shapes[x][-1], b.draw(st.integers(1, 6))
    w = b.rng.standard_normal((k, o)) / np.sqrt(k)
    if len(b.shapes[x]) == 1 and b.draw(st.booleans()):
        return b.node("Gemm", [x, b.const(w.T), b.const(b.rng.standard_normal(o) * 0.1)], (o,), transB=1)
    return b.node("MatMul", [x, b.const(w)], (*b.shapes[x][:-1], o))


def _unary(b, x):
    return b.node(b.draw(st.sampled_from(["Relu", "Sigmoid", "Identity"])), [x], b.shapes[x])


def _layout(b, x):
    shape = b.shapes[x]
    kind = b.draw(st.sampled_from(["flatten", "reshape", "transpose", "concat"]))
    if kind == "flatten":
        return b.node("Flatten", [x], (int(np.prod(shape)),), axis=1)
    if kind == "reshape":  # (C, H, W) -> (C, H * W): a 1-D signal; anything else -> one axis
        target = (shape[0], int(np.prod(shape[1:]))) if len(shape) == 3 else (int(np.prod(shape)),)
        return b.node("Reshape", [x, b.const(np.array([-1, *target]))], target)
    if kind == "transpose" and len(shape) > 1:
        perm = b.draw(st.permutations(range(1, len(shape) + 1)))
        return b.node("Transpose", [x], tuple(shape[p - 1] for p in perm), perm=[0, *perm])
    other = b.draw(st.sampled_from([n for n, s in b.shapes.items() if s == shape]))
    return b.node("Concat", [x, other], (shape[0] * 2, *shape[1:]), axis=1)


def _refused(b, x):
    """What MRT refuses (or must, to stay faithful): the batch axis moved or merged, a division by zero."""
    shape = b.shapes[x]
    kind = b.draw(st.sampled_from(["batch transpose", "batch reshape", "zero divisor"]))
    if kind == "zero divisor":
        return b.node("Div", [x, b.const(np.zeros(shape[-1]))], shape)
    b.done = True  # the batch axis is no longer axis 0 (the shapes tracked here are per sample): the last step
    if kind == "batch transpose":
        return b.node("Transpose", [x], shape, perm=[1, 0, *range(2, len(shape) + 1)])
    return b.node("Reshape", [x, b.const(np.array([-1]))], (int(np.prod(shape)),))


STEPS = {"conv": (_conv, (3,)), "pool": (_pool, (2, 3)), "elementwise": (_elementwise, None),
         "dense": (_dense, None), "unary": (_unary, None), "layout": (_layout, None)}
REFUSED = 0.05  # the share of steps MRT should refuse


@st.composite
def graphs(draw):
    """(onnx model, per-sample input shape) of 1 to 6 random steps."""
    b = _Builder(draw, (draw(st.integers(1, 3)), draw(st.integers(3, 6)), draw(st.integers(3, 6))))
    for _ in range(draw(st.integers(1, 6))):
        if b.done:
            break
        refused = draw(st.integers(0, 99)) < 100 * REFUSED
        step, ranks = (_refused, None) if refused else STEPS[draw(st.sampled_from(sorted(STEPS)))]
        x = b.pick(ranks)
        if x is not None:
            step(b, x)
    if not b.nodes:
        b.node("Relu", ["x"], b.shapes["x"])
    # the initializers' constants are stored as float32 here; Reshape's target must be int64
    inits = {k: (v.astype(np.int64) if any(n.op_type == "Reshape" and n.input[1] == k for n in b.nodes) else v)
             for k, v in b.inits.items()}
    return build_model(b.nodes, {"x": b.shapes["x"]}, [b.nodes[-1].output[0]], inits), b.shapes["x"]


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(graphs())
def test_conversion_gives_a_loadable_model_or_one_named_error(case):
    model, shape = case
    x = np.random.default_rng(1).standard_normal((32, *shape)).astype(F32)
    try:
        m = pipeline.convert(model, x, progress=False)
    except OWN as e:
        message = str(e)
        assert "\n" not in message and "node " in message, message
        return
    again = cvm.loads(m.to_bytes())
    assert again.hash == m.hash
    y = again.run(again.quantize_input(x[:2]), backend="reference")
    want = next(iter(ort_run(model, {"x": x[:1]}).values()))
    # one sample's output: without its unit axis (a size-1 axis, moved in front where a Transpose moved it,
    # mrt.onnx_import.one_sample), or whole
    def sizes(shape):
        return sorted(d for d in shape if d != 1)
    assert sizes(y.shape[1:]) == sizes(want.shape) and y.shape[0] == 2, (y.shape, want.shape)


def test_an_internal_error_names_the_node_and_keeps_its_cause():
    node = Node("relu", ("x",), ("y",), {}, "the_relu")

    def rule(n):
        return {}[n.name]  # a KeyError, as a rule that looked up a missing tensor raised

    with pytest.raises(QuantizeError, match=r"^node 'the_relu' \(relu\): internal error in stage quantize: KeyError") as e:
        with contained("quantize"):
            for node in [node]:  # noqa: B007 - the stage's own loop over the graph, as emit's
                rule(node)
    assert isinstance(e.value.__cause__, KeyError)


@pytest.mark.parametrize("stage,error,expected", [
    ("import", GraphError("shape does not fit"), UnsupportedOp),
    ("passes", GraphError("shape does not fit"), QuantizeError),
    ("verify", cvm.VerifyError("attrs.strides", "strides must be 2 ints", "y/sum"), QuantizeError),
    ("calibrate", ValueError("unknown calibration method"), BadInput),
    ("import", TypeError("unhashable"), UnsupportedOp),
])
def test_every_other_error_becomes_one_of_three(stage, error, expected):
    with pytest.raises(expected) as e:
        with contained(stage):
            raise error
    assert e.value.__cause__ is error and "\n" not in str(e.value)


def test_own_errors_pass_and_gain_the_node_they_were_raised_at():
    with pytest.raises(QuantizeError, match=r"^node 'n1' \(dense\): rescale ratio"):
        with contained("quantize"):
            node = Node("dense", ("x", "w"), ("y",), {}, "n1")  # noqa: F841 - the frame's node
            raise QuantizeError("rescale ratio 1e30 is too large for a multiply + shift")


def test_own_errors_raised_away_from_any_node_keep_their_message():
    with pytest.raises(BadInput, match="^calibration data 'x' is all zeros"):
        with contained("calibrate"):
            raise BadInput("calibration data 'x' is all zeros")
