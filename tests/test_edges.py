"""A node's input listings (edges): in opsets 1-3 one node may list any number of inputs, so loading,
verifying, planning and the reference's run must do per listing only C-level work; opset 4 bounds
the listings of a node (limits.node_inputs)."""
from __future__ import annotations

import gc
import sys
import threading
import time
from dataclasses import replace

import numpy as np
import pytest

from cvm import limits
from cvm.errors import LimitError, VerifyError
from cvm.format import encode_file, encode_graph
from cvm.interp import numba as nb
from cvm.interp import reference
from cvm.ir import Graph, Input, Node
from cvm.model import Model
from cvm.ops import OPSETS
from cvm.verify import Verifier, verify

HANG_GUARD_S = 60  # not a speed assertion: the 10^6-listing concat took 3.7 s to load and 2.3 s to plan


def _concat_file(listings: int, opset: int = 3, names=("x",)) -> bytes:
    """One concat listing `names` (inputs of shape (1,)) round robin, `listings` times in all, and a
    relu after it (a node of the plan that reads the concat)."""
    inputs = [Input(n, (1,), 8) for n in names]
    ins = tuple(names) * (listings // len(names)) + tuple(names[:listings % len(names)])
    nodes = [Node("concat", ins, "y", {"axis": 0}), Node("relu", ("y",), "z")]
    return encode_file(encode_graph(Graph(inputs, {}, nodes, ["z"], opset)), {})


def _feed(model: Model, batch: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {s.name: rng.integers(-127, 128, (batch, *s.shape[1:])).astype(s.dtype) for s in model.inputs}


def _python_steps(fn) -> int:
    """Python-level calls, generator resumptions and lines (a comprehension's every turn) that fn()
    runs, counted by the trace hook."""
    count = [0]

    def trace(frame, event, arg):
        count[0] += 1
        return trace
    gc.collect()  # (a collection during fn would run other tests' finalizers under the hook: a shared
    gc.disable()  # xdist worker counted 1158 against 1171 once)
    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
        gc.enable()
    return count[0]


def _stages(data: bytes):
    """Loading, numba planning and the reference's prepare and run, as separate callables."""
    model = Model.from_bytes(data)
    feed = _feed(model)
    return {"load": lambda: Model.from_bytes(data),
            "plan": lambda: nb.prepare(model.graph, model.analysis, threads=1),
            "reference": lambda: reference.prepare(model.graph, model.analysis)(feed)}


@pytest.mark.parametrize("names", [("x",), ("x", "w", "v")])
def test_per_listing_work_is_c_level(names):
    """The Python steps of each stage do not grow with the listings: 999 and 30,000 listings of the
    same names run the same steps."""
    small, large = _stages(_concat_file(999, names=names)), _stages(_concat_file(30_000, names=names))
    for stage in small:
        small[stage]()  # imports and caches first
        assert _python_steps(small[stage]) == _python_steps(large[stage]), stage


def _with_hang_guard(fn):
    done, out = threading.Event(), []
    worker = threading.Thread(target=lambda: (out.append(fn()), done.set()), daemon=True)
    t0 = time.perf_counter()
    worker.start()
    assert done.wait(HANG_GUARD_S), f"took over {HANG_GUARD_S} s"
    return out[0], time.perf_counter() - t0


def test_million_listing_concat_loads_plans_and_runs_alike():
    data = _concat_file(10 ** 6)
    assert len(data) < 2_100_000
    model, _ = _with_hang_guard(lambda: Model.from_bytes(data))
    assert model.analysis.tensors["y"].shape == (10 ** 6,)
    feed = _feed(model)
    runner, _ = _with_hang_guard(lambda: nb.prepare(model.graph, model.analysis, threads=1))
    got, _ = _with_hang_guard(lambda: runner(feed))
    want, _ = _with_hang_guard(lambda: reference.prepare(model.graph, model.analysis)(feed))
    np.testing.assert_array_equal(want["z"], np.repeat(np.maximum(feed["x"], 0), 10 ** 6, axis=1))
    assert got["z"].dtype == want["z"].dtype
    np.testing.assert_array_equal(got["z"], want["z"])


def test_repeated_inputs_with_constants_numba_equals_reference():
    """Distinct activations and constants of different widths along the axis, each listed several
    times in a scrambled order: the gather of the numba plan against the reference."""
    rng = np.random.default_rng(2)
    inputs = [Input("a", (2, 3), 8), Input("b", (2, 1), 4)]
    consts = {"c": rng.integers(-9, 10, (2, 2)).astype(np.int8), "d": np.full((2, 1), 300, np.int16)}
    order = tuple(rng.choice(["a", "b", "c", "d"], 40))
    nodes = [Node("concat", ("a",) + order, "y", {"axis": 1})]
    model = Model(Graph(inputs, consts, nodes, ["y"], 3))
    feed = _feed(model, batch=5)
    want = reference.prepare(model.graph, model.analysis)(feed)["y"]
    parts = {**feed, **{k: np.broadcast_to(v, (5, *v.shape)) for k, v in consts.items()}}
    np.testing.assert_array_equal(want, np.concatenate([parts[n] for n in ("a",) + order], axis=2))
    for isa in nb.available_isas():
        np.testing.assert_array_equal(nb.prepare(model.graph, model.analysis, isa=isa)(feed)["y"], want)


def _wide_graph(listings: int, opset: int, first=None) -> Graph:
    nodes = ([first] if first else []) + [Node("concat", ("x",) * listings, "y", {"axis": 0})]
    return Graph([Input("x", (1,), 8)], {}, nodes, ["y"], opset)


def test_node_inputs_limit_on_a_verifier():
    """limits.node_inputs on any Limits that sets it (opsets 1-3 set none)."""
    assert all(limits.of(k).node_inputs is None for k in (1, 2, 3))
    v = Verifier(3)
    v.limits = replace(v.limits, node_inputs=4)
    v.add_input(Input("x", (1,), 8))
    v.add_node(Node("concat", ("x",) * 4, "y", {"axis": 0}))
    with pytest.raises(LimitError) as e:
        v.add_node(Node("concat", ("x",) * 5, "z", {"axis": 0}))
    assert e.value.rule == "limits.node_inputs" and "5 inputs > 4" in str(e.value) and e.value.node == "z"


@pytest.mark.skipif(4 not in OPSETS, reason="opset 4 is not in cvm.ops.OPSETS yet")
def test_opset4_refuses_1025_listings_and_accepts_1024():
    cap = limits.MAX_NODE_INPUTS
    assert limits.of(4).node_inputs == cap == 1024
    assert verify(_wide_graph(cap, 4)).tensors["y"].shape == (cap,)
    Model.from_bytes(encode_file(encode_graph(_wide_graph(cap, 4)), {}))
    for data in (_wide_graph(cap + 1, 4), encode_file(encode_graph(_wide_graph(cap + 1, 4)), {})):
        with pytest.raises(LimitError) as e:
            verify(data) if isinstance(data, Graph) else Model.from_bytes(data)
        assert e.value.rule == "limits.node_inputs" and f"{cap + 1} inputs > {cap}" in str(e.value)
    verify(_wide_graph(10 ** 5, 3))  # opset 3 keeps no such limit


@pytest.mark.skipif(4 not in OPSETS, reason="opset 4 is not in cvm.ops.OPSETS yet")
def test_opset4_checks_node_inputs_before_any_other_work():
    """An earlier node that breaks another rule: verify() still reports limits.node_inputs first."""
    bad = Node("no_such_op", ("undefined",), "w")
    with pytest.raises(LimitError) as e:
        verify(_wide_graph(limits.MAX_NODE_INPUTS + 1, 4, first=bad))
    assert e.value.rule == "limits.node_inputs"
    with pytest.raises(VerifyError) as e:
        verify(_wide_graph(limits.MAX_NODE_INPUTS, 4, first=bad))
    assert e.value.rule == "node.op"


def _refusal(inputs, consts, node) -> tuple[str, str]:
    with pytest.raises(VerifyError) as e:
        verify(Graph(inputs, consts, [node], [node.output], 3))
    return e.value.rule, str(e.value)


def test_first_failing_position_raises():
    """Checks made at the few positions that can fail: the first failing position in listing order
    still decides the rule and the message."""
    x, w, b = Input("x", (4,), 8), np.ones((2, 4), np.int8), np.zeros(2, np.int32)
    rule, msg = _refusal([x], {"w": w, "b": b}, Node("dense", ("nope", "x", "b"), "y"))
    assert rule == "structure.order" and "'nope'" in msg
    rule, msg = _refusal([x], {"w": w, "b": b}, Node("dense", ("x", "x", "nope"), "y"))
    assert rule == "node.const_input" and "input 1 ('x')" in msg
    rule, msg = _refusal([x], {"w": w, "b": b}, Node("dense", ("w", "nope", "b"), "y"))
    assert rule == "node.activation_input"
    rule, msg = _refusal([x], {"w": w}, Node("concat", ("x", "x", "a", "b", "a"), "y", {"axis": 0}))
    assert rule == "structure.order" and "'a'" in msg
    rule, _ = _refusal([x], {"w": w}, Node("concat", ("w", "w"), "y", {"axis": 0}))
    assert rule == "node.const_only"


def test_concat_shape_refusals_name_every_listing():
    x, v = Input("x", (4,), 8), Input("v", (2, 2), 8)
    rule, msg = _refusal([x, v], {}, Node("concat", ("x", "x", "v", "x"), "y", {"axis": 0}))
    assert rule == "shape.rank" and "[(4,), (4,), (2, 2), (4,)]" in msg
    u, t = Input("u", (2, 3), 8), Input("t", (5, 2), 8)
    rule, msg = _refusal([u, t, v], {}, Node("concat", ("v", "u", "t", "v"), "y", {"axis": 1}))
    assert rule == "shape.concat" and "[(2, 2), (2, 3), (5, 2), (2, 2)]" in msg
    rule, _ = _refusal([x], {}, Node("concat", ("x", "x"), "y", {"axis": 1}))
    assert rule == "attrs.axis"
