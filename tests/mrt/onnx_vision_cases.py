"""The ONNX node-test cases of Resize, Upsample and ConvTranspose that MRT does not run as given
(read by test_onnx_node_conformance.py): SKIPS must be refused by the importer; ORT_NOT_REFERENCE are
imported and compared with onnxruntime, because onnxruntime and the case's expected values disagree."""

_CUBIC = "Resize mode 'cubic' (CVM's resize2d has nearest and linear)"
_CROP = "Resize coordinate_transformation_mode 'tf_crop_and_resize' (roi)"
_ANTIALIAS = "Resize antialias=1 (linear downsampling with a widened filter)"
_ASPECT = "Resize keep_aspect_ratio_policy not_larger / not_smaller"

SKIPS = {
    "test_convtranspose_1d": "1-D transposed convolution (CVM's conv_transpose2d is 2-D)",
    "test_convtranspose_3d": "3-D transposed convolution (CVM's conv_transpose2d is 2-D)",
    **{f"test_resize_{k}": _CUBIC for k in (
        "downsample_scales_cubic", "downsample_scales_cubic_A_n0p5_exclude_outside",
        "downsample_scales_cubic_align_corners", "downsample_sizes_cubic", "upsample_scales_cubic",
        "upsample_scales_cubic_A_n0p5_exclude_outside", "upsample_scales_cubic_align_corners",
        "upsample_scales_cubic_asymmetric", "upsample_sizes_cubic", "downsample_scales_cubic_antialias",
        "downsample_sizes_cubic_antialias")},
    **{f"test_resize_{k}": _CROP for k in (
        "tf_crop_and_resize", "tf_crop_and_resize_axes_2_3", "tf_crop_and_resize_axes_3_2",
        "tf_crop_and_resize_extrapolation_value")},
    "test_resize_downsample_scales_linear_antialias": _ANTIALIAS,
    "test_resize_downsample_sizes_linear_antialias": _ANTIALIAS,
    **{f"test_resize_{k}": _ASPECT for k in (
        "downsample_sizes_nearest_not_larger", "downsample_sizes_nearest_not_smaller",
        "upsample_sizes_nearest_not_larger", "upsample_sizes_nearest_not_smaller")},
}

ORT_NOT_REFERENCE = {
    "test_resize_downsample_scales_linear_align_corners":
        "align_corners with a scale that does not divide the length: the case divides by length*scale - 1 "
        "(1.4), onnxruntime by the integer output length - 1 (1); MRT follows onnxruntime",
}
