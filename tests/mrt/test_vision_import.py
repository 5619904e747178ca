"""Import of Resize (10, 11, 13, 18, 19), Upsample (7, 9) and ConvTranspose (1, 11, 22) against
onnxruntime on small random models, and the one-line refusals of what CVM's opset 2 does not compute."""
from fractions import Fraction

import numpy as np
import pytest
from onnx import helper

from conftest import build_model, ort_run
from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx, opsets
from mrt.onnx_import.ops_vision import coord

N = helper.make_node


def f32(a):
    return np.asarray(a, np.float32)


def check(model, shape, rng, batch=3, atol=1e-5):
    graph = import_onnx(model)
    x = f32(rng.standard_normal((batch, *shape)))
    want = ort_run(model, {"x": x})["y"]
    got = run_float(graph, {"x": x})["y"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
    return graph


def _resize(opset, shape, *, scales=None, sizes=None, **attrs):
    inits = {"roi": f32([])}
    ins = ["x", "roi"]
    if scales is not None:
        inits["scales"] = f32(scales)
        ins.append("scales")
    else:
        ins.append("")
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        ins.append("sizes")
    return build_model([N("Resize", ins, ["y"], **attrs)], {"x": shape}, ["y"], inits, opset=opset)


COORDS = ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = [[1, 1, 2, 2], [1, 1, 3, 1.5], [1, 1, 0.5, 0.75], [1, 1, 2.5, 0.6]]


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("ctm", COORDS)
@pytest.mark.parametrize("nearest", NEAREST)
def test_resize_nearest_scales(opset, ctm, nearest, rng):
    for scales in SCALES:
        if ctm == "tf_half_pixel_for_nn" and opset >= 18:
            continue  # removed from the schema in 18? onnxruntime still runs it; checked at 11 and 13
        check(_resize(opset, (2, 5, 6), scales=scales, mode="nearest", coordinate_transformation_mode=ctm,
                      nearest_mode=nearest), (2, 5, 6), rng)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"])
def test_resize_linear_scales_and_sizes(opset, ctm, rng):
    for scales in SCALES:
        check(_resize(opset, (3, 4, 6), scales=scales, mode="linear", coordinate_transformation_mode=ctm),
              (3, 4, 6), rng)
    for sizes in ([1, 3, 9, 5], [1, 3, 1, 13], [1, 3, 2, 3]):
        if opset == 11:
            continue  # Resize-11 needs scales as well as sizes (an empty tensor); covered from 13
        check(_resize(opset, (3, 4, 6), sizes=sizes, mode="linear", coordinate_transformation_mode=ctm),
              (3, 4, 6), rng, batch=1)  # sizes[0] is the exporter's batch size (ignored by the import)


def test_resize_half_pixel_symmetric_and_axes(rng):
    for mode in ("nearest", "linear"):
        check(_resize(19, (2, 5, 7), scales=[1.5, 2.25], axes=[2, 3], mode=mode,
                      coordinate_transformation_mode="half_pixel_symmetric"), (2, 5, 7), rng)
        check(_resize(18, (2, 5, 7), sizes=[9, 3], axes=[-2, -1], mode=mode), (2, 5, 7), rng)


def _old_models():
    return [
        build_model([N("Resize", ["x", "s"], ["y"], mode="nearest")], {"x": (2, 3, 4)}, ["y"],
                    {"s": f32([1, 1, 2, 1.5])}, opset=10),
        build_model([N("Upsample", ["x", "s"], ["y"], mode="nearest")], {"x": (2, 3, 4)}, ["y"],
                    {"s": f32([1, 1, 2, 2])}, opset=9),
        build_model([N("Upsample", ["x"], ["y"], mode="nearest", scales=[1.0, 1.0, 3.0, 2.0])], {"x": (2, 3, 4)},
                    ["y"], opset=7),
    ]


def _old_linear_models():
    return [
        build_model([N("Resize", ["x", "s"], ["y"], mode="linear")], {"x": (2, 3, 4)}, ["y"],
                    {"s": f32([1, 1, 2, 0.5])}, opset=10),
        build_model([N("Upsample", ["x", "s"], ["y"], mode="linear")], {"x": (2, 3, 4)}, ["y"],
                    {"s": f32([1, 1, 2, 3])}, opset=9),
    ]


def test_resize_10_and_upsample_handlers(rng, monkeypatch):
    """Resize-10 and Upsample-7/9 read by their own handlers (asymmetric coordinates; nearest floors when
    upsampling and ceils when downsampling, as onnxruntime runs them), the opset upgrade bypassed."""
    monkeypatch.setattr(opsets, "MIN_OPSET", opsets.OLDEST_OPSET)
    for model in _old_models() + _old_linear_models():
        check(model, (2, 3, 4), rng)


def test_resize_10_and_upsample_upgraded(rng):
    for model in _old_models():
        check(model, (2, 3, 4), rng)


def test_linear_resize_10_and_upsample_upgraded(rng):
    """onnx.version_converter leaves these at half_pixel; mrt.onnx_import.opsets restores asymmetric."""
    for model in _old_linear_models():
        check(model, (2, 3, 4), rng)


CT_CASES = [
    dict(strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(strides=[2, 3], pads=[0, 1, 2, 0], output_padding=[1, 2], dilations=[1, 1]),
    dict(strides=[1, 2], dilations=[2, 3], pads=[1, 0, 0, 2], output_padding=[0, 1]),
    dict(strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(strides=[3, 2], auto_pad="SAME_LOWER"),
    dict(strides=[2, 2], auto_pad="VALID"),
    dict(strides=[3, 2], output_shape=[10, 8]),
    dict(strides=[2, 2], output_shape=[9, 12], auto_pad="SAME_UPPER"),
    dict(strides=[2, 2], output_shape=[9, 12], auto_pad="SAME_LOWER"),
]


@pytest.mark.parametrize("opset", [11, 13, 22])
@pytest.mark.parametrize("case", range(len(CT_CASES)))
@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose(opset, case, group, rng):
    w = f32(rng.standard_normal((4, 3, 3, 4)))
    b = f32(rng.standard_normal(3 * group))
    node = N("ConvTranspose", ["x", "w", "b"], ["y"], group=group, **CT_CASES[case])
    check(build_model([node], {"x": (4, 4, 5)}, ["y"], {"w": w, "b": b}, opset=opset), (4, 4, 5), rng, atol=1e-4)


def test_conv_transpose_without_bias_and_kernel_shape(rng):
    w = f32(rng.standard_normal((2, 5, 2, 2)))
    node = N("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[2, 2], strides=[2, 2])
    g = check(build_model([node], {"x": (2, 3, 3)}, ["y"], {"w": w}), (2, 3, 3), rng, atol=1e-4)
    assert [n.op for n in g.nodes] == ["conv_transpose"] and g.shapes["y"] == (5, 6, 6)


@pytest.mark.parametrize("nodes, inits, message", [
    ([N("Resize", ["x", "", "s"], ["y"])], {"s": f32([1, 2, 2, 2])}, "channel axis"),
    ([N("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], output_shape=[3, 3], pads=[0, 0, 0, 0])],
     {"w": f32(np.ones((2, 1, 3, 3)))}, None),
])
def test_refusals_name_the_node(nodes, inits, message):
    model = build_model(nodes, {"x": (2, 3, 3)}, ["y"], inits, opset=19)
    if message is None:  # output_shape smaller than the full output: cropped by pads, imports
        import_onnx(model)
        return
    with pytest.raises(UnsupportedOp, match=f"Resize node 'y'.*{message}"):
        import_onnx(model)


def test_coordinate_maps_are_exact_rationals():
    """half_pixel at scale 2: (i + 0.5)/2 - 0.5 = (2i - 1)/4; nearest round_prefer_floor folds into
    floor((4i - 2 + 4 - 1) / 8) = floor((4i + 1) / 8), reduced."""
    assert coord("half_pixel", None, Fraction(2), 4, 8) == [2, -1, 4]
    assert coord("half_pixel", "round_prefer_floor", Fraction(2), 4, 8) == [4, 1, 8]
    assert coord("asymmetric", "floor", Fraction(1, 2), 8, 4) == [2, 0, 1]
    assert coord("align_corners", None, Fraction(7, 4), 4, 7) == [1, 0, 2]
    assert coord("align_corners", "round_prefer_ceil", Fraction(1, 4), 4, 1) == [0, 1, 2]
