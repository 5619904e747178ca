"""MRT's ONNX import + float executor against ONNX's own per-operator conformance cases.

`onnx.backend.test.case.node.collect_testcases()` rebuilds the node tests offline (model, inputs,
expected outputs). Every case whose ops are all ones MRT imports is run through import_onnx +
run_float and compared with the expected outputs. A case's inputs are one sample (MRT imports what the graph
computes for one sample, mrt.onnx_import.one_sample), fed as a CVM batch of one. The first input is the data;
another input is data too where it has the first one's rank and leading dim and is not an integer (axes,
indices, shapes) or an input MRT requires to be constant (weights, pads, divisors, ...); the rest become
constants.

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

from cvm.model import NARROW_FLOATS, NARROW_INTEGERS
from mrt.errors import UnsupportedOp
from mrt.float_exec import run_float
from mrt.onnx_import import import_onnx
from mrt.onnx_import.importer import HANDLERS
from mrt.onnx_import.one_sample import as_batch, as_sample
from mrt.onnx_import.opsets import MAX_OPSET
from onnx_vision_cases import ORT_NOT_REFERENCE
from onnx_vision_cases import SKIPS as VISION_SKIPS

SUPPORTED = {op for domain, op in HANDLERS if domain == ""} | {"Constant"}

# Inputs MRT requires to be constants, by op type and input position.
CONST_INPUTS = {
    "Conv": {1, 2}, "Gemm": {1, 2}, "BatchNormalization": {1, 2, 3, 4}, "Div": {1},
    "Clip": {1, 2}, "Pad": {1, 2, 3}, "Reshape": {1}, "Dropout": {1, 2},
    "ConvTranspose": {1, 2}, "Resize": {1, 2, 3}, "Upsample": {1},
    **{op: {1, 2, 3, 4, 7} for op in ("LSTM", "GRU", "RNN")},
    "LayerNormalization": {1, 2}, "InstanceNormalization": {1, 2}, "CumSum": {1}, "GatherND": {1}, "Trilu": {1},
    "OneHot": {1, 2}, "CumProd": {1}, "Col2Im": {1, 2}, "DFT": {1, 2},
}

IMPORTED_DTYPES = tuple(np.dtype(t) for t in (np.float32, np.float64, np.float16, np.int64, np.int32, np.int16, np.int8,
                                              np.uint64, np.uint32, np.uint16, np.uint8, np.bool_))
# Whole ops whose conformance cases are out of scope (each case still must be rejected).
OP_SKIPS = {
    "Shape": "the output is the input's shape, a constant for one sample (folded), so the graph would have no "
             "output computed from its input",
}
# Supported ops none of whose conformance cases can run, and where they are tested instead.
NOT_RUN = {
    "Not": "its cases are written at opset 1, older than onnx.version_converter upgrades; Not is tested in "
           "test_univariate.py",
    "Size": "the output is the input's element count, a constant for one sample (folded at import)",
    "Constant": "always folded at import; the one case has a constant output (test_import.py)",
}
SKIPS = {
    "test_gathernd_example_int32_batch_dim1": "GatherND with batch_dims 1 (0 is supported)",
    "test_wrap_pad": "Pad mode 'wrap' (constant, reflect and edge are supported)",
    "test_reshape_allowzero_reordered": "empty input (batch of 0 with dims moved)",
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
    "test_size": "the output is the input's element count, a constant for one sample",
    "test_size_example": "the output is the input's element count, a constant for one sample",
    "test_split_zero_size_splits_opset13": "a zero-size split: CVM has no empty tensors",
    "test_split_zero_size_splits_opset18": "a zero-size split: CVM has no empty tensors",
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
# of integer models (a divisor must be a constant; no empty tensors), so a case
# skipped here is still checked to fail loudly, with that message.
REFUSALS = {
    "division by a non-constant divisor": "division by a tensor (softmax or a normalisation written out); "
                                          "MRT divides by constants, softmax is a rule of its own",
    "a dim of size 0": "a dim of size 0 (an empty tensor): CVM has no empty tensors",
    "Cast to": "a Cast to a type MRT does not compute (strings, 8-, 6-, 4- and 2-bit floats and integers)",
    "older models: re-export": "a model of opset 1..6, older than onnx.version_converter upgrades",
    "is empty": "an empty slice: CVM has no empty tensors",
    "make an empty tensor": "a zero-size split: CVM has no empty tensors",
    "only the last axis is supported": "LayerNormalization over more than the last axis",
}


def _refusal_reason(case):
    try:
        model, _ = batched_model(case, [_array(v) for v in case.data_sets[0][0]])
        import_onnx(model)
    except UnsupportedOp as e:
        return next((why for pattern, why in REFUSALS.items() if pattern in str(e)), None)
    return None


def _dtype_reason(case):
    """Cases with an input of a type the import refuses (complex numbers, strings) test a variant of the op for
    that type; cases written at an opset newer than MRT checks are refused by name too."""
    opset = max((o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    if opset > MAX_OPSET:
        return f"opset {opset} model: MRT imports opsets up to {MAX_OPSET}"
    for inputs, _ in case.data_sets:
        for k, value in enumerate(inputs):
            dtype = _array(value).dtype
            if dtype not in IMPORTED_DTYPES and dtype.name not in NARROW_FLOATS | NARROW_INTEGERS:
                return f"{dtype} inputs: MRT imports float (float4 to float64), bool and integer inputs"
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
    """The case's model with the inputs MRT needs constant made constants; returns the model and the
    one-sample inputs (as_batch makes them a batch of one once the graph says each one's unit axis)."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    g = model.graph
    must_const = _const_positions(model)
    first = np.asarray(inputs[0]) if inputs else None
    feeds, keep = {}, []
    for k, (vi, value) in enumerate(zip(list(g.input), inputs)):
        value = np.asarray(value) if vi.type.HasField("tensor_type") else value
        data = k == 0 or (vi.name not in must_const and value.dtype.kind == "f" and value.ndim == first.ndim
                          and value.ndim > 0 and value.shape[0] == first.shape[0])
        if not vi.type.HasField("tensor_type") or data or (vi.name not in must_const and
                                                           value.dtype not in (np.float32, np.int64)):
            keep.append(vi)  # sequences, optionals, other dtypes: left for import to refuse
            feeds[vi.name] = value
        else:
            g.initializer.append(numpy_helper.from_array(np.asarray(value), vi.name))
    del g.input[:]
    g.input.extend(keep)
    return model, feeds


def _array(v):
    """A case value as numpy: types numpy lacks (bfloat16, float8, ...) come as TensorProtos."""
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else np.asarray(v)


def run_case(case):
    for inputs, expected in case.data_sets:
        inputs, expected = [_array(v) for v in inputs], [_array(v) for v in expected]
        model, feeds = batched_model(case, list(inputs))
        graph = import_onnx(model)
        got = run_float(graph, {k: as_batch(v, graph.unit_axis(k)) for k, v in feeds.items()})
        if case.name in ORT_NOT_REFERENCE:
            import onnxruntime
            session = onnxruntime.InferenceSession(case.model.SerializeToString())
            expected = session.run(None, {vi.name: np.asarray(v) for vi, v in zip(case.model.graph.input, inputs)})
        names = [o.name for o in case.model.graph.output]
        assert set(got) == set(names)
        # the case's own tolerance when looser (some expected values are rounded by hand)
        rtol, atol = max(1e-4, case.rtol), max(1e-5, case.atol)
        for name, want in zip(names, expected):
            np.testing.assert_allclose(as_sample(got[name][0], graph.unit_axis(name)), want, rtol=rtol, atol=atol,
                                       err_msg=name)


# Cases that import but cannot be compared: expected values rounded to a type MRT does not compute in (it computes
# in float32), or inputs holding NaN or infinity, which MRT refuses (IsNaN / IsInf of its finite tensors are false)
ROUNDED = {
    **{name: "the expected values are rounded to bfloat16 (8 significant bits); MRT computes in float32"
       for name in ("test_celu_bfloat16", "test_celu_bfloat16_expanded", "test_cast_FLOAT_to_BFLOAT16")},
    **{f"test_{name}": "the inputs hold NaN or infinity, which MRT's calibration and inputs refuse"
       for name in ("isnan", "isnan_float16", "isinf", "isinf_float16", "isinf_negative", "isinf_positive")},
}


@pytest.mark.parametrize("name", sorted(_cases()))
def test_node_case(name):
    if name in ROUNDED:
        pytest.skip(ROUNDED[name])
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
