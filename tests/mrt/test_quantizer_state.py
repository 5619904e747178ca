"""The quantizer's state: emission verifies each node as it is emitted, bounds are read without side
effects, QT is keyword-only, and the target's pre-rounding is a hook the config names."""
from __future__ import annotations

import numpy as np
import pytest

import cvm
from mrt.graph import Graph
from mrt.quantize import config_for
from mrt.quantize.state import QT, Quantizer


def _quantizer(target="cvm"):
    return Quantizer(Graph([], [], {}, []), {}, config_for(target))


def test_reads_have_no_side_effects_and_emission_is_verified_at_the_node():
    qz = _quantizer()
    x = qz.input("x", (4,), 8)
    y = qz.op("relu", x, name="r")
    before = dict(qz.bounds._verifier.tensors)
    assert qz.interval(y) == (0, 127) and qz.shape_of(y) == (4,)
    assert qz.bounds._verifier.tensors == before
    with pytest.raises(cvm.VerifyError, match="clip"):
        qz.op("clip", y, lo=5, hi=1, name="bad")


def test_qt_is_keyword_only():
    with pytest.raises(TypeError):
        QT("t", np.asarray(1.0))
    assert QT(name="t", scale=np.asarray(1.0)).axis is None


def test_pre_rounding_is_chosen_by_the_config():
    assert config_for("cvm").pre_rounding == "none"
    assert config_for("fhe").pre_rounding == "lookup_budget"
    qz = _quantizer("fhe")
    x = qz.input("x", (4,), 12)  # [-2047, 2047] is wider than the 6-bit lookup budget
    t = qz.requant(QT(name=x, scale=np.asarray(1.0)), 1.0, 6, name="q")
    assert [n.op for n in qz.b.nodes] == ["requant", "requant"]  # the rounding shift, then the rescale
    assert qz.b.nodes[0].attrs["shift"] == 7 and t.narrow  # round(2047 / 2^6) = 32 > 31, round(2047 / 2^7) = 16
