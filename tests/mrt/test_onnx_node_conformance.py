"""MRT's ONNX import + float executor against ONNX's own per-operator conformance cases.

`onnx.backend.test.case.node.collect_testcases()` rebuilds the node tests offline (model, inputs,
expected outputs). Every case whose ops are all ones MRT imports is run through import_onnx +
run_float and compared with the expected outputs. The node tests have no batch concept, so the
harness declares the first input's first axis to be the (symbolic) batch axis; every other input
becomes a constant (weights, pads, divisors, ...) unless it could be a second batched input (same
rank and leading dim, and not an input MRT requires to be constant).

A case is skipped only for a reason listed in SKIPS or OP_SKIPS, and a skipped case must still be
refused by the importer (UnsupportedOp), so the lists cannot silently go stale.
"""
import functools
import warnings
from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.onnx_import.importer import HANDLERS
from mrt.onnx_import.opsets import MAX_OPSET
from onnx_vision_cases import ORT_NOT_REFERENCE
from onnx_vision_cases import SKIPS as VISION_SKIPS

SUPPORTED = {op for domain, op in HANDLERS if domain == ""} | {"Constant"}

# Inputs MRT requires to be constants, by op type and input position.
CONST_INPUTS = {
    "Conv": {1, 2}, "Gemm": {1, 2}, "BatchNormalization": {1, 2, 3, 4}, "Div": {1},
    "Clip": {1, 2}, "Pad": {1, 2, 3}, "Reshape": {1}, "Dropout": {1, 2},
    "ConvTranspose": {1, 2}, "Resize": {1, 2, 3}, "Upsample": {1},
}

_INT_DTYPES = "integer inputs: MRT imports float32 models only"
_BATCH = "the op works along the first axis, which the harness makes the batch axis"
_LITERAL_BATCH = ("the Reshape target spells the batch size as a literal (2), valid for that batch "
                  "size only; MRT needs 0, -1 or the size taken from Shape")
# Whole ops whose conformance cases are out of scope (each case still must be rejected).
OP_SKIPS = {
    "Cast": "dtype conversions: MRT imports float32 graphs; Cast float->float on a batched tensor "
            "is the identity and other Casts only appear in folded shape arithmetic",
    "Shape": "the output is the input's shape, a constant for MRT (folded; its batch entry is "
             "symbolic), so the graph would have no batched output",
}
# Supported ops none of whose conformance cases can run, and where they are tested instead.
NOT_RUN = {
    **{op: "every case repeats along the first axis, the harness's batch axis; tested in test_shape_ops.py"
       for op in ("Expand", "Tile")},
    "Celu": "its one float case is written at an opset newer than MRT checks; tested in test_univariate.py",
    **{op: "every case compares or selects with integer, boolean or string tensors; float comparisons and "
           "Where are tested in test_univariate.py" for op in ("Equal", "Not", "Where")},
    "Constant": "always folded at import; the one case has a constant output (test_import.py)",
    "LayerNormalization": "every case normalises over more than the last axis or asks for the Mean and InvStdDev "
                          "training outputs; Y over the last axis is tested in test_transformer.py",
    "Reshape": "every case reshapes the first axis or spells the batch size as a literal; "
               "batch-keeping reshapes are tested in test_import.py",
}
SKIPS = {
    **{f"test_{op}_{t}": _INT_DTYPES for op in ("add", "sub", "mul", "div")
       for t in ("int8", "int16", "uint8", "uint16", "uint32", "uint64")},
    "test_div_int32_trunc": "integer division truncates; MRT refuses Div on integer tensors",
    "test_clip_default_int8_min": _INT_DTYPES,
    "test_clip_default_int8_max": _INT_DTYPES,
    "test_clip_default_int8_inbounds": _INT_DTYPES,
    "test_clip_default_int8_inbounds_expanded": _INT_DTYPES,
    "test_maxpool_2d_uint8": _INT_DTYPES,
    "test_wrap_pad": "Pad mode 'wrap' (constant, reflect and edge are supported)",
    "test_div": "division by a non-constant: the divisor varies along the batch axis",
    "test_div_example": "division by a non-constant: the divisor varies along the batch axis",
    "test_concat_1d_axis_0": _BATCH, "test_concat_1d_axis_negative_1": _BATCH,
    "test_concat_2d_axis_0": _BATCH, "test_concat_2d_axis_negative_2": _BATCH,
    "test_concat_3d_axis_0": _BATCH, "test_concat_3d_axis_negative_3": _BATCH,
    "test_softmax_axis_0": _BATCH,
    "test_flatten_axis0": "Flatten axis=0 merges the batch axis",
    "test_flatten_axis2": "Flatten axis=2 merges the batch axis",
    "test_flatten_axis3": "Flatten axis=3 merges the batch axis",
    "test_flatten_negative_axis4": "Flatten axis=-4 (=0) merges the batch axis",
    "test_flatten_negative_axis1": "Flatten axis=-1 (=3) merges the batch axis",
    "test_flatten_negative_axis2": "Flatten axis=-2 merges the batch axis",
    "test_reshape_reordered_all_dims": "Reshape changes the first (batch) dim",
    "test_reshape_reordered_last_dims": _LITERAL_BATCH,
    "test_reshape_zero_dim": _LITERAL_BATCH,
    "test_reshape_reduced_dims": "Reshape changes the first (batch) dim",
    "test_reshape_extended_dims": "Reshape changes the first (batch) dim",
    "test_reshape_one_dim": "Reshape changes the first (batch) dim",
    "test_reshape_negative_dim": "Reshape changes the first (batch) dim",
    "test_reshape_negative_extended_dims": "Reshape changes the first (batch) dim",
    "test_reshape_zero_and_negative_dim": "Reshape changes the first (batch) dim",
    "test_reshape_allowzero_reordered": "empty input (batch of 0 with dims moved)",
    "test_matmul_1d_3d": "a rank-1 first operand: the batch axis would be contracted",
    "test_matmul_1d_1d": "a rank-1 first operand: the batch axis would be contracted",
    "test_gemm_default_matrix_bias": "the Gemm bias C has one row per sample (varies along the "
                                     "batch axis)",
    "test_gemm_transposeA": "Gemm transA=1 transposes the batch axis",
    "test_gemm_all_attributes": "Gemm transA=1 transposes the batch axis",
    "test_batchnorm_example_training_mode": "BatchNormalization in training mode",
    "test_batchnorm_epsilon_training_mode": "BatchNormalization in training mode",
    "test_maxpool_with_argmax_2d_precomputed_pads": "the MaxPool Indices output",
    "test_maxpool_with_argmax_2d_precomputed_strides": "the MaxPool Indices output",
    "test_dropout_default_mask": "the Dropout mask output",
    "test_dropout_default_mask_ratio": "the Dropout mask output",
    "test_training_dropout_default": "Dropout in training mode (random)",
    "test_training_dropout_default_mask": "Dropout in training mode (random)",
    "test_training_dropout": "Dropout in training mode (random)",
    "test_training_dropout_mask": "Dropout in training mode (random)",
    "test_training_dropout_zero_ratio": "Dropout in training mode",
    "test_training_dropout_zero_ratio_mask": "Dropout in training mode",
    "test_prelu_example": "the slope has the input's shape, so the harness batches it; MRT needs a constant slope",
    "test_constant": "the output is a constant (no input, nothing batched)",
    "test_identity_sequence": "sequence types",
    "test_identity_opt": "optional types",
    **VISION_SKIPS,
}


@functools.lru_cache(maxsize=1)
def _cases():
    from onnx.backend.test.case.node import collect_testcases
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = {}
    for case in cases:
        types = {n.op_type for n in case.model.graph.node}
        if types <= SUPPORTED and types - {"Constant"} or types == {"Constant"}:
            out[case.name] = case
    return out


# A case refused with one of these messages is skipped with the reason beside it: each names a limit
# of integer models (the batch axis is fixed; a divisor must be a constant; no empty tensors), so a case
# skipped here is still checked to fail loudly, with that message.
REFUSALS = {
    "the batch axis": _BATCH,
    "move the batch axis": _BATCH,
    "broadcasts against the batch axis": _BATCH,
    "computes with the batch size": "shape arithmetic on the batch size, which MRT keeps symbolic",
    "division by a non-constant divisor": "division by a tensor (softmax or a normalisation written out); "
                                          "MRT divides by constants, softmax is a rule of its own",
    "are symbolic": "a dim of size 0 (an empty tensor), which the harness cannot make concrete",
    "is empty": "an empty slice: CVM has no empty tensors",
    "make an empty tensor": "a zero-size split: CVM has no empty tensors",
    "only the last axis is supported": "LayerNormalization over more than the last axis",
    "mean and inverse std outputs are not computed": "LayerNormalization's Mean and InvStdDev outputs (training "
                                                     "statistics); Y alone is tested in test_transformer.py",
    "holds the batch": "a sequence-first recurrent input (layout 0) whose batch axis (1) is fixed while the harness "
                       "batches axis 0, the sequence; layout 0 is tested in test_rnn_import.py",
}


def _refusal_reason(case):
    try:
        model, _ = batched_model(case, list(case.data_sets[0][0]))
        import_onnx(model)
    except UnsupportedOp as e:
        return next((why for pattern, why in REFUSALS.items() if pattern in str(e)), None)
    return None


def _dtype_reason(case):
    """Cases with an input that is not float32, int32 or int64 (integer inputs are token ids and masks)
    test a narrow-integer, boolean or half-precision variant of the op, which the import refuses; cases
    written at an opset newer than MRT checks are refused by name too."""
    opset = max((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > MAX_OPSET:
        return f"opset {opset} model: MRT imports opsets up to {MAX_OPSET}"
    for inputs, _ in case.data_sets:
        for k, value in enumerate(inputs):
            dtype = np.asarray(value).dtype
            if dtype not in (np.float32, np.int64, np.int32):
                return f"{dtype} inputs: MRT imports float32, int32 and int64 inputs"
    return None


def _reason(name, case):
    return SKIPS.get(name) or OP_SKIPS.get(_group(case)) or _dtype_reason(case) or _refusal_reason(case)


def _group(case):
    """The op a case is counted under: its one op type, or 'A+B' for multi-op cases."""
    types = sorted({n.op_type for n in case.model.graph.node} - {"Constant"}) or ["Constant"]
    return "+".join(types)


def _const_positions(model):
    """Graph inputs MRT needs as constants: those some node reads at a CONST_INPUTS position."""
    names = set()
    for node in model.graph.node:
        for k in CONST_INPUTS.get(node.op_type, ()):
            if k < len(node.input) and node.input[k]:
                names.add(node.input[k])
    return names


def batched_model(case, inputs):
    """The case's model with the first input batched (symbolic first dim); returns the model
    and the inputs fed at run time."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    must_const = _const_positions(model)
    first = np.asarray(inputs[0]) if inputs else None
    feeds, keep = {}, []
    for k, (vi, value) in enumerate(zip(list(g.input), inputs)):
        if not vi.type.HasField("tensor_type"):  # sequences, optionals: left for import to refuse
            keep.append(vi)
            continue
        value = np.asarray(value)
        batched = k == 0 or (vi.name not in must_const and value.ndim == first.ndim
                             and value.ndim > 0 and value.shape[0] == first.shape[0])
        batched = batched or value.dtype not in (np.float32, np.int64)  # left for import to refuse
        if batched and value.ndim > 0:
            vi.type.tensor_type.shape.dim[0].Clear()
            vi.type.tensor_type.shape.dim[0].dim_param = "N"
        if batched:
            feeds[vi.name] = value
            keep.append(vi)
        else:
            g.initializer.append(numpy_helper.from_array(value, vi.name))
    del g.input[:]
    g.input.extend(keep)
    return model, feeds


def run_case(case):
    for inputs, expected in case.data_sets:
        model, feeds = batched_model(case, list(inputs))
        graph = import_onnx(model)
        got = run_float(graph, feeds)
        if case.name in ORT_NOT_REFERENCE:
            import onnxruntime
            session = onnxruntime.InferenceSession(case.model.SerializeToString())
            expected = session.run(None, {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)})
        names = [o.name for o in case.model.graph.output]
        assert set(got) == set(names)
        # the case's own tolerance when looser (some expected values are rounded by hand)
        rtol, atol = max(1e-4, case.rtol), max(1e-5, case.atol)
        for name, want in zip(names, expected):
            # an output whose ONNX batch axis is not 0 is stored batch-first (batch_major.py)
            want = np.moveaxis(np.asarray(want), graph.batch_axes.get(name, 0), 0)
            np.testing.assert_allclose(got[name], want, rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("name", sorted(_cases()))
def test_node_case(name):
    case = _cases()[name]
    reason = _reason(name, case)
    if reason:
        with pytest.raises(UnsupportedOp):
            run_case(case)
        pytest.skip(reason)
    run_case(case)


def test_counts_per_op():
    """How many cases ran per op (the rest are in SKIPS, each with its reason)."""
    ran, skipped = Counter(), Counter()
    for name, case in _cases().items():
        skip = _reason(name, case) is not None
        (skipped if skip else ran)[_group(case)] += 1
    print("\nONNX node conformance cases per op (ran / skipped):")
    for op in sorted(ran.keys() | skipped.keys()):
        print(f"  {op:24s} {ran[op]:3d} / {skipped[op]}")
    assert not set(SKIPS) - set(_cases()), "SKIPS names cases that no longer exist"
    missing = sorted(op for op in SUPPORTED - NOT_RUN.keys() - OP_SKIPS.keys() if op not in ran)
    assert not missing, f"supported ops with no conformance case run: {missing}"
