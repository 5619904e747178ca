"""The ONNX node-test cases of Resize, Upsample and ConvTranspose that MRT does not run as given
(read by test_onnx_node_conformance.py; cubic, tf_crop_and_resize, antialias and keep_aspect_ratio_policy import as
constant linear maps, mrt.onnx_import.ops_linear_maps): SKIPS must be refused by the importer; ORT_NOT_REFERENCE are
imported and compared with onnxruntime, because onnxruntime and the case's expected values disagree."""

SKIPS = {
    "test_convtranspose_1d": "1-D transposed convolution (CVM's conv_transpose2d is 2-D)",
    "test_convtranspose_3d": "3-D transposed convolution (CVM's conv_transpose2d is 2-D)",
}

ORT_NOT_REFERENCE = {
    "test_resize_downsample_scales_linear_align_corners":
        "align_corners with a scale that does not divide the length: the case divides by length*scale - 1 "
        "(1.4), onnxruntime by the integer output length - 1 (1); MRT follows onnxruntime",
}
