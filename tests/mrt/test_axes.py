"""The axis convention crosses once: float IR axes (batch counted) -> CVM per-sample axes."""
from __future__ import annotations

import pytest

from mrt.graph import Node
from mrt.quantize.axes import AXIS_ATTRS, per_sample
from mrt.quantize.state import QuantizeError


@pytest.mark.parametrize("op, attrs, want", [
    ("softmax", {"axis": 1}, {"axis": 0}),
    ("concat", {"axis": 3}, {"axis": 2}),
    ("sum", {"axes": (2, 3), "keepdims": 1}, {"axes": (1, 2), "keepdims": 1}),
    ("transpose", {"perm": (0, 2, 3, 1)}, {"perm": (1, 2, 0)}),
    ("pad", {"pads": (0, 0, 1, 2, 0, 0, 3, 4), "value": 0.0}, {"pads": (0, 1, 2, 0, 3, 4), "value": 0.0}),
    ("conv", {"pads": (1, 1, 1, 1)}, {"pads": (1, 1, 1, 1)}),  # spatial pads: no batch axis to drop
])
def test_per_sample(op, attrs, want):
    node = per_sample(Node(op, ("x",), ("y",), attrs))
    assert dict(node.attrs) == want


@pytest.mark.parametrize("op, attrs, match", [
    ("softmax", {"axis": 0}, "batch axis"),
    ("transpose", {"perm": (1, 0)}, "moves the batch axis"),
    ("pad", {"pads": (1, 0, 0, 0), "value": 0.0}, "pad the batch axis"),
])
def test_batch_axis_is_refused(op, attrs, match):
    with pytest.raises(QuantizeError, match=match):
        per_sample(Node(op, ("x",), ("y",), attrs))


def test_table_names_only_attributes_that_count_the_batch_axis():
    assert set(AXIS_ATTRS) == {"softmax", "concat", "sum", "reduce_max", "argmax", "slice", "transpose", "pad"}
