"""Attribute bounds (docs/spec.md, "Attribute bounds") and verification time linear in the file.

Each model here was accepted before the bounds existed and crashed a backend, computed unpaid work, or
took seconds to verify."""
from __future__ import annotations

import numpy as np
import pytest

import cvm
from cvm import limits
from cvm.errors import VerifyError
from cvm.format import decode_graph, encode_graph
from cvm.ir import Graph, Input, Node

HUGE = (1 << 63, (1 << 64) - 1, limits.MAX_GEOMETRY + 1)


def _graph(op, attrs, x_shape=(1, 4, 4), consts=None, extra=()):
    consts = consts or {}
    return Graph([Input("x", x_shape, 8)], consts, [Node(op, ("x", *consts, *extra), "y", attrs)], ["y"])


def _rule(graph) -> str:
    with pytest.raises(VerifyError) as e:
        cvm.Model(decode_graph(encode_graph(graph)))
    return e.value.rule


W1 = {"w": np.ones((1, 1, 1, 1), np.int8)}


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize("key,n,rule", [("strides", 2, "attrs.strides"), ("dilations", 2, "attrs.dilations"),
                                        ("pads", 4, "attrs.pads")])
def test_conv2d_geometry_is_bounded(key, n, rule, value):
    assert _rule(_graph("conv2d", {key: [value] * n}, consts=W1)) == rule


@pytest.mark.parametrize("value", HUGE)
@pytest.mark.parametrize("key,n", [("kernel", 2), ("strides", 2), ("dilations", 2), ("pads", 4)])
def test_max_pool_geometry_is_bounded(key, n, value):
    attrs = {"kernel": [1, 1], key: [value] * n}
    assert _rule(_graph("max_pool2d", attrs)) == f"attrs.{key}"


@pytest.mark.parametrize("lo,hi", [(0, 1 << 63), (-(1 << 63), 0), (0, 1 << 31), (-(1 << 31) - 1, 0)])
def test_clip_bounds_lie_in_int32(lo, hi):
    assert _rule(_graph("clip", {"lo": lo, "hi": hi})) == "attrs.clip"


def test_clip_at_the_int32_extremes_is_accepted_and_runs_everywhere():
    model = cvm.Model(_graph("clip", {"lo": limits.MIN_CLIP, "hi": limits.MAX_CLIP}))
    x = np.array([[[[-127, 0], [5, 127]]]], np.int8).reshape(1, 1, 2, 2)
    model = cvm.Model(_graph("clip", {"lo": limits.MIN_CLIP, "hi": limits.MAX_CLIP}, x_shape=(1, 2, 2)))
    for backend in ("reference", "numba"):
        np.testing.assert_array_equal(model.run(x, backend=backend), x)


def test_slice_step_and_pad_are_bounded():
    assert _rule(_graph("slice", {"starts": [0], "ends": [4], "steps": [1 << 63]}, x_shape=(4,))) == "attrs.slice"
    assert _rule(_graph("pad", {"pads": [0, 1 << 63]}, x_shape=(4,))) == "attrs.pads"


def test_requant_axis_is_bounded_even_per_tensor():
    consts = {"m": np.array([1], np.int32)}
    assert _rule(_graph("requant", {"shift": 0, "bits": 8, "axis": 1 << 63}, consts=consts)) == "attrs.axis"
    cvm.Model(_graph("requant", {"shift": 0, "bits": 8, "axis": limits.MAX_AXIS}, consts=consts))


def test_conv_tap_indices_cannot_wrap():
    """The crafted conv that gave [0 0 1000] on numba: its geometry is now out of bounds."""
    graph = _graph("conv2d", {"strides": [1 << 62, 1], "pads": [1 << 62, 0, 1 << 62, 0]}, x_shape=(1, 1, 3),
                   consts={"w": np.full((1, 1, 1, 1), 100, np.int8)})
    assert _rule(graph) == "attrs.strides"


# ------------------------------------------------------------------ verification time

def _max_pool_chain(n_nodes: int) -> Graph:
    """The denial-of-service file: a chain of max_pool nodes, each keeping the 2^20-row shape, whose
    windows start half a million rows into the padding (the old padding check looped over each of
    them in Python, 0.34 s a node), and whose outputs together pass limits.memory only at the end."""
    k, p = limits.MAX_GEOMETRY - 1, (limits.MAX_GEOMETRY - 2) // 2
    nodes, prev = [], "x"
    for i in range(n_nodes):
        nodes.append(Node("max_pool2d", (prev,), f"p{i}", {"kernel": [k, 1], "pads": [p, 0, p, 0]}))
        prev = f"p{i}"
    return Graph([Input("x", (1, limits.MAX_DIM, 1), 8)], {}, nodes, [prev])


def test_max_pool_chain_stops_at_the_memory_limit():
    """Was 88 s, rejected after the last node; the padding check is now closed-form (O(log)) and the
    memory limit is checked after every node, so it stops at the first node past 256 MiB."""
    with pytest.raises(cvm.LimitError) as e:
        cvm.Model(_max_pool_chain(300))
    assert e.value.rule == "limits.memory" and e.value.node == "p256"


def test_activation_memory_is_checked_after_every_node():
    """A model over limits.memory is refused at the first node past the limit, not after all of them."""
    b = cvm.GraphBuilder()
    x = b.input("x", (1 << 20,), bits=8)
    ys = [b.op("relu", x) for _ in range(300)]
    with pytest.raises(cvm.LimitError) as e:
        b.build(ys[-1])
    assert e.value.rule == "limits.memory" and e.value.node == ys[256]


def test_shared_weight_is_summed_once(monkeypatch):
    """Many dense nodes reading one large weight: its row sums are computed once, not once per node
    (each was a 64 MiB int64 copy of the weight)."""
    import cvm.ops.base as base
    calls = []
    original = base.row_sums
    monkeypatch.setattr(base, "row_sums", lambda v: calls.append(v.shape) or original(v))
    b = cvm.GraphBuilder()
    x = b.input("x", (4096,), bits=2)
    w = b.const(np.ones((16, 4096), np.int8))
    ys = [b.op("dense", x, w) for _ in range(50)]
    cvm.Model(b.graph(ys))
    assert calls == [(16, 4096)]


def test_huge_attribute_lists_are_refused_by_the_length_check():
    assert _rule(_graph("max_pool2d", {"kernel": [1, 1], "strides": [1] * 1_000_000})) == "attrs.strides"
