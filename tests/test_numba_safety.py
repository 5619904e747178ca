"""The numba backend on attacker-shaped models: geometry at the verifier's bounds, no unpaid buffers,
caches bounded in bytes (docs/spec.md 5.4 and 9, "What the cost and the memory check pay for")."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import cvm
from cvm import limits
from cvm.interp import numba as numba_backend
from cvm.interp.numba_kernels import lower_mac, plan, threads

G = limits.MAX_GEOMETRY


def _same_on_both(model: cvm.Model, x: np.ndarray) -> np.ndarray:
    ref = model.run(x, backend="reference")
    np.testing.assert_array_equal(model.run(x, backend="numba"), ref)
    return ref


def _big_pad_conv(c: int = 1) -> cvm.Model:
    """A 1x1 conv whose pads and strides sit at the bound: 3x3 outputs, one of which reads the input."""
    b = cvm.GraphBuilder()
    x = b.input("x", (c, 2, 2), bits=8)
    w = b.const(np.full((2, c, 1, 1), 3, np.int8))
    return b.build(b.op("conv2d", x, w, strides=[G, G], pads=[G, G, G, G]))


def test_conv_at_the_geometry_bound_gives_the_spec_result_without_big_buffers():
    model = _big_pad_conv()
    x = np.full((2, 1, 2, 2), -7, np.int8)
    tracemalloc.start()
    y = _same_on_both(model, x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    want = np.zeros((2, 2, 3, 3), np.int64)
    want[:, :, 1, 1] = -21
    np.testing.assert_array_equal(y, want)
    assert peak < 64 << 20, f"{peak} bytes allocated for a model of {model.gas} gas"


def _plan_labels(model: cvm.Model, isa: str) -> list[str]:
    p, _ = plan.build(model.graph, model.analysis, isa, threads.Pool(1), numba_backend.LOWERINGS)
    return [step.label for step in p.steps]


def test_vnni_path_is_refused_when_its_padded_copy_is_not_paid_for():
    """Planning (no VNNI CPU needed): the padded uint8 copy of this conv would be 2^42 bytes."""
    b = cvm.GraphBuilder()
    x = b.input("x", (4, 2, 2), bits=8)
    model = b.build(b.op("conv2d", x, b.const(np.ones((4, 4, 1, 1), np.int8)), strides=[G, G], pads=[G, G, G, G]))
    assert not any("[vnni]" in label for label in _plan_labels(model, "vnni"))


def test_honest_models_keep_the_vnni_path(monkeypatch):
    """The rule changes no committed model's plan (so no speed): same labels with the rule switched off."""
    for name in ("mnist_cnn", "resnet_cifar"):
        model = cvm.load(f"fixtures/models/{name}.cvm")
        with_rule = _plan_labels(model, "vnni")
        monkeypatch.setattr(lower_mac, "padding_is_paid", lambda geom, out_channels, k: True)
        without = _plan_labels(model, "vnni")
        monkeypatch.undo()
        assert with_rule == without and any("[vnni]" in label for label in with_rule)


def test_padding_rule_on_ordinary_geometry():
    same = dict(h=7, w=7, c=64, pt=1, pl=1, pb=1, pr=1, oh=7, ow=7)
    assert lower_mac.padding_is_paid(same, 64, 9 * 64)
    tiny = dict(h=1, w=1, c=8, pt=1, pl=1, pb=1, pr=1, oh=1, ow=1)  # 3x3 on a 1x1 map: 9x the input
    assert lower_mac.padding_is_paid(tiny, 8, 9 * 8)
    huge = dict(h=2, w=2, c=4, pt=G, pl=G, pb=G, pr=G, oh=3, ow=3)
    assert not lower_mac.padding_is_paid(huge, 4, 4)


@pytest.mark.parametrize("kernel,pads,dilations,strides", [
    ((G, 1), (G - 3, 0, 0, 0), (1, 1), (G, 1)),  # a 2^20-row window over a 4-row input
    ((2, 2), (G, G, G, G), (G, G), (G, G)),  # taps 2^20 apart
    ((3, 1), (2, 0, 2, 0), (1, 1), (G, 1)),  # stride at the bound
])
def test_max_pool_at_the_geometry_bound(kernel, pads, dilations, strides):
    b = cvm.GraphBuilder()
    x = b.input("x", (2, 4, 3), bits=8)
    try:
        model = b.build(b.op("max_pool2d", x, kernel=kernel, pads=pads, dilations=dilations, strides=strides))
    except cvm.VerifyError as e:
        assert e.rule in ("attrs.pads", "shape.empty")
        return
    x = np.arange(-12, 12, dtype=np.int8).reshape(1, 2, 4, 3)
    _same_on_both(model, x)


def test_clip_slice_requant_at_their_bounds():
    b = cvm.GraphBuilder()
    x = b.input("x", (6, 5), bits=16)
    y = b.op("clip", x, lo=limits.MIN_CLIP, hi=limits.MAX_CLIP)
    y = b.op("slice", y, starts=[1, 0], ends=[6, 5], steps=[G, 2])
    y = b.op("requant", y, b.const([3]), shift=1, bits=8, axis=limits.MAX_AXIS)
    model = b.build(y)
    x = np.random.default_rng(0).integers(-32767, 32768, (3, 6, 5)).astype(np.int16)
    _same_on_both(model, x)


def test_clip_with_int32_bounds_does_not_depend_on_what_was_compiled_before():
    """Typed once as int64 arguments: the same result whatever ran first in this process."""
    for lo, hi in ((limits.MIN_CLIP, 5), (-5, limits.MAX_CLIP), (0, 0)):
        b = cvm.GraphBuilder()
        x = b.input("x", (4,), bits=32)
        model = b.build(b.op("clip", x, lo=lo, hi=hi))
        _same_on_both(model, np.array([[-(2 ** 31 - 1), -1, 7, 2 ** 31 - 1]], np.int32))


def test_buffer_cache_is_bounded_in_bytes(monkeypatch):
    b = cvm.GraphBuilder()
    x = b.input("x", (1024,), bits=8)
    model = b.build(b.op("relu", b.op("relu", x)))
    runner = model.runner("numba")
    per_sample = 1024 * 3  # input buffer and two outputs, int8
    monkeypatch.setattr(numba_backend, "MAX_BOUND_BYTES", 40 * per_sample)
    for batch in (1, 2, 4, 8, 16):
        model.run(np.ones((batch, 1024), np.int8))
        assert runner.cached_bytes() <= 40 * per_sample
    model.run(np.ones((64, 1024), np.int8))  # a set over the budget serves its call and is not kept
    assert runner.cached_bytes() <= 40 * per_sample
    assert 64 not in runner._local.cache
