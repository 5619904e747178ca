"""import_onnx: ONNX ModelProto -> MRT float Graph, for one sample (mrt.onnx_import.one_sample).

Supported: default-domain opsets 7..28 (older ones upgraded, mrt.onnx_import.opsets) and ai.onnx.ml (for scikit-learn models).
Every symbolic input dim is fixed first (a symbolic batch at 1, the others from the caller or the calibration
data), so every shape is one sample's and concrete. Every node whose inputs are all constants (Constant, torch's
Shape/Gather/Unsqueeze/Concat/Cast plumbing, position ids from Range, weight transposes) is evaluated at import
with onnx's reference implementation; Shape of an activation folds to one sample's shape. Every other node goes
through HANDLERS, which emit MRT IR nodes, in the form one_sample chooses. Anything else is an UnsupportedOp
naming the op and node.

Graph outputs keep their ONNX names. The one ONNX output left out is a LinearClassifier's label
(scikit-learn models): the graph's output is then the scores/probabilities tensor (ops_ml.py).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.reference import ReferenceEvaluator

from mrt.errors import BadInput, GraphError, UnsupportedOp
from mrt.float_ops import BATCH
from mrt.graph import Graph, Node, fresh_name
from mrt.limits import check_onnx
from mrt.onnx_import import ops_core as core
from mrt.onnx_import import ops_index, ops_integer, ops_tail
from mrt.onnx_import import ops_ml as ml
from mrt.onnx_import import ops_nn as nn
from mrt.onnx_import import ops_reduce as reduce_ops
from mrt.onnx_import import ops_rnn as rnn
from mrt.onnx_import import ops_shape as shape_ops
from mrt.onnx_import import ops_text as text
from mrt.onnx_import import ops_trees as trees
from mrt.onnx_import import ops_unary as unary_ops
from mrt.onnx_import import ops_vision as vision
from mrt.onnx_import import const_concat, decompose, forms, functions, one_sample
from mrt.onnx_import.attrs import Attrs, where
from mrt.onnx_import.control import inline_if
from mrt.onnx_import.unroll import UNROLL
from mrt.onnx_import.context import ImportContext
from mrt.onnx_import.one_sample import INTEGER_TYPES
from mrt.onnx_import.inputs import FLOAT_ELEM_TYPES, graph_input, shapes_for, unit_axis
from mrt.onnx_import.opsets import ML_DOMAIN, opsets as model_opsets, upgrade


# Ops that would fold to a different constant on every import.
RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
              "Multinomial", "Bernoulli"}

# op -> the inputs whose values (not only shapes) set its output's shape: computed from the data, the model's
# shapes would depend on the data, which no CVM graph expresses
VALUE_SHAPED = {"Range": (0, 1, 2), "ConstantOfShape": (0,), "BlackmanWindow": (0,), "HannWindow": (0,),
                "HammingWindow": (0,), "MelWeightMatrix": (0, 1, 2)}

# (domain, op_type) -> (handler, since_versions of the op schema the handler implements)
HANDLERS = {
    ("", "Conv"): (nn.conv, {11, 22}),
    ("", "Gemm"): (nn.gemm, {13}),
    ("", "MatMul"): (nn.matmul, {13}),
    ("", "Add"): (core.binary("add"), {13, 14}),
    ("", "Sub"): (core.binary("sub"), {13, 14}),
    ("", "Mul"): (core.binary("mul"), {13, 14}),
    ("", "Div"): (core.binary("div"), {13, 14}),
    ("", "Relu"): (core.unary("relu"), {13, 14}),
    ("", "LeakyRelu"): (core.leaky_relu, {6, 16}),
    ("", "Clip"): (core.clip, {13}),
    ("", "Sigmoid"): (core.unary("sigmoid"), {13}),
    ("", "HardSigmoid"): (core.hard_sigmoid, {6, 22}),
    ("", "Tanh"): (core.unary("tanh"), {13}),
    ("", "Softmax"): (core.softmax, {13}),
    ("", "LogSoftmax"): (core.log_softmax, {13}),
    ("", "MaxPool"): (nn.max_pool, {12, 22}),
    ("", "AveragePool"): (nn.average_pool, {11, 19, 22}),
    ("", "GlobalAveragePool"): (nn.global_average_pool, {1, 22}),
    ("", "BatchNormalization"): (nn.batch_normalization, {9, 14, 15}),
    ("", "Flatten"): (core.flatten, {13, 21, 23, 24, 25}),
    ("", "Reshape"): (core.reshape, {13, 14, 19, 21, 23, 24, 25}),
    ("", "Transpose"): (core.transpose, {13, 21, 23, 24, 25}),
    ("", "Concat"): (const_concat.concat, {13}),
    ("", "Pad"): (core.pad, {13, 18, 19, 21, 23, 24, 25}),
    ("", "CastLike"): (core.cast_like, {15, 19, 21, 23, 24, 25}),
    ("", "Identity"): (core.identity, {13, 14, 16, 19, 21, 23, 24, 25}),
    ("", "Dropout"): (core.dropout, {13, 22}),
    ("", "Shape"): (one_sample.fold_shape, {13, 15, 19, 21, 23, 24, 25}),
    ("", "Size"): (one_sample.fold_shape, {13, 19, 21, 23, 24, 25}),
    (ML_DOMAIN, "Scaler"): (ml.scaler, {1}),
    (ML_DOMAIN, "LinearClassifier"): (ml.linear_classifier, {1}),
    (ML_DOMAIN, "Normalizer"): (ml.normalizer, {1}),
    **{(ML_DOMAIN, op): entry for module in (ml, trees) for op, entry in module.HANDLERS.items()},
    **{("", op): entry for module in (unary_ops, shape_ops, reduce_ops, rnn) for op, entry in module.HANDLERS.items()},
    **{("", op): entry for op, entry in vision.HANDLERS.items()},
    **{("", op): entry for op, entry in ml.ONNX_HANDLERS.items()},   # Sum
    **{("", op): entry for op, entry in text.HANDLERS.items()},  # after ops_shape/ops_core: Gather, Div
    **{("", op): entry for op, entry in ops_index.HANDLERS.items()},
    **{("", op): entry for module in (ops_integer, ops_tail) for op, entry in module.HANDLERS.items()},
}


def _load(model_or_path):
    if isinstance(model_or_path, onnx.ModelProto):
        model, what = model_or_path, "the ONNX model"
    elif isinstance(model_or_path, (bytes, bytearray, str, os.PathLike)):
        what = "the ONNX bytes" if isinstance(model_or_path, (bytes, bytearray)) else os.fspath(model_or_path)
        model = _parse(model_or_path, what)
    else:
        raise TypeError(f"import_onnx takes a ModelProto, bytes or a path, not "
                        f"{type(model_or_path).__name__}")
    if not model.graph.output:
        raise BadInput(f"{what} is not an ONNX model: it has no graph outputs")
    return model


def _parse(source, what: str):
    """protobuf raises DecodeError (or, on some inputs, other errors) for bytes that are no model."""
    try:
        if isinstance(source, (bytes, bytearray)):
            return onnx.load_from_string(bytes(source))
        return onnx.load(os.fspath(source))
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - any parse failure is the file's fault
        raise BadInput(f"{what} is not a parseable ONNX model ({type(e).__name__}: {e})") from None


def _fold(ctx, node, opsets):
    """Evaluate a node whose inputs are all constants with onnx's reference implementation."""
    if node.op_type in RANDOM_OPS:
        raise UnsupportedOp(f"{where(node)}: random ops are not supported")
    feeds = {i: ctx.consts[i] for i in node.input if i}
    domain = node.domain if node.domain != "ai.onnx" else ""
    try:
        ref = ReferenceEvaluator(node, opsets={domain: opsets.get(domain, 1)})
        out = ref.run(None, feeds)
    except Exception as e:  # the reference raises many types; onnxruntime folds what it cannot
        out = _fold_with_onnxruntime(node, feeds, opsets, domain)
        if out is None:
            raise UnsupportedOp(f"{where(node)}: constant folding failed: {e}") from e
    for name, value in zip(node.output, out):
        if name:
            ctx.consts[name] = np.asarray(value)


def _fold_with_onnxruntime(node, feeds, opsets, domain):
    """The node's outputs from onnxruntime (onnx's reference evaluator fails on some valid nodes: GatherElements
    of data (1, 16) by indices (1, 16)), or None where onnxruntime cannot run it either."""
    import onnxruntime
    try:
        inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in feeds.items()]
        outputs = [onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o]
        graph = onnx.helper.make_graph([node], "fold", [], outputs, inits)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(domain, opsets.get(domain, 1))])
        model.ir_version = 8
        model = onnx.shape_inference.infer_shapes(model)
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return session.run(None, {})
    except Exception:  # noqa: BLE001 - the caller reports the reference evaluator's error
        return None


def _handle(ctx, node, opsets):
    domain = node.domain if node.domain != "ai.onnx" else ""
    handler, versions = HANDLERS.get((domain, node.op_type), (None, None))
    computed = [node.input[k] for k in VALUE_SHAPED.get(node.op_type, ()) if k < len(node.input)
                and node.input[k] and not ctx.is_const(node.input[k])] if domain == "" else []
    if computed:
        raise UnsupportedOp(f"{where(node)}: the output's shape is set by the value of {computed[0]!r}, which "
                            "depends on the data")
    if handler is None and domain == "" and node.op_type in decompose.DECOMPOSE:
        for inner in decompose.DECOMPOSE[node.op_type](ctx, node):
            _import_node(ctx, inner, opsets)
        return None
    if handler is None:
        if functions.has_body(node, opsets):
            return _expand(ctx, node, opsets)
        raise UnsupportedOp(f"{where(node)}: op {domain + '.' if domain else ''}{node.op_type} (opset "
                            f"{opsets.get(domain, 1)}) is not supported")
    since = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain).since_version
    if since not in versions:
        if functions.has_body(node, opsets):
            return _expand(ctx, node, opsets)
        raise UnsupportedOp(f"{where(node)}: version {since} of {node.op_type} is not supported")
    attrs = Attrs(node)
    one_sample.handle(ctx, node, attrs, HANDLERS, opsets)
    attrs.check_all_read()


def _expand(ctx, node, opsets):
    """An op ONNX defines by a function body (functions.py), imported as that body."""
    types = functions.elem_types(ctx)
    try:
        nodes, inner_opsets = functions.expand(ctx, node, opsets, types)
        types.update(functions.body_types(nodes, inner_opsets, types))
        ctx.integer_tensors |= {name for name, t in types.items() if t in INTEGER_TYPES}
        for inner in nodes:
            _import_node(ctx, inner, inner_opsets)
    except UnsupportedOp as e:
        raise UnsupportedOp(f"{where(node)}, imported as ONNX's function body for {node.op_type}: {e}") from None


def _import_node(ctx, node, opsets):
    if node.op_type == "If" and node.domain in ("", "ai.onnx"):  # a constant condition: the branch it takes
        for inner in inline_if(ctx, node):
            _import_node(ctx, inner, opsets)
    elif node.op_type in UNROLL and node.domain in ("", "ai.onnx"):  # Scan, Loop of a fixed count: unrolled
        for inner in UNROLL[node.op_type](ctx, node):
            _import_node(ctx, inner, opsets)
    elif all(ctx.is_const(i) for i in node.input if i):
        _fold(ctx, node, opsets)
    else:
        _handle(ctx, node, opsets)


def _integer_outputs(g, outputs) -> frozenset:
    """The outputs ONNX declares integer or boolean."""
    declared = {o.name: o.type.tensor_type.elem_type for o in g.output if o.type.HasField("tensor_type")}
    floats = (*FLOAT_ELEM_TYPES, TensorProto.UNDEFINED)
    return frozenset(o for o in outputs if declared.get(o, TensorProto.UNDEFINED) not in floats)


def _unit_outputs(ctx, outputs):
    """A graph output stored whole whose ONNX axis 0 is 1 is given as its unit-axis form, the form every output
    of a model that computes per sample has: the CVM output is one sample's ONNX output with axis 0 left out."""
    for name in outputs:
        if forms.form(ctx, name) is not forms.WHOLE or ctx.onnx_shape(name, None)[:1] != (1,) or \
                len(ctx.onnx_shape(name, None)) == 1:  # (1,) stays whole: CVM has no rank-0 sample
            continue
        inner = fresh_name(f"{name}/whole", ctx.taken())
        ctx.full[inner] = ctx.full.pop(name)
        forms.set_form(ctx, inner, forms.WHOLE)
        forms.set_form(ctx, name, 0)
        renamed = [Node(n.op, tuple(inner if i == name else i for i in n.inputs),
                        tuple(inner if o == name else o for o in n.outputs), n.attrs, name=n.name) for n in ctx.nodes]
        shape = ctx.full[inner][2:]
        ctx.nodes = renamed + [Node("reshape", (inner,), (name,), {"shape": tuple(shape)},
                                    name=fresh_name(f"{name}/unit", {n.name for n in renamed}))]
        ctx.full[name] = (BATCH, *shape)


def integer_tensors(model) -> set:
    """Names of the tensors ONNX's type inference gives an integer element type (computed from integer
    inputs such as token ids): ops whose integer semantics differ from float's (Div truncates) refuse
    them. Only a model with an integer graph input or a Cast to an integer can compute one (Shape
    arithmetic folds to constants), so any other model skips the inference (a copy of every weight). A
    model type inference cannot read (over 2 GiB) gives the empty set."""
    integer = INTEGER_TYPES
    weights = {t.name for t in model.graph.initializer}
    inputs = any(vi.type.tensor_type.elem_type in integer for vi in model.graph.input if vi.name not in weights)
    casts = any(n.op_type == "Cast" and any(a.name == "to" and a.i in integer for a in n.attribute)
                for n in model.graph.node)
    if not (inputs or casts):
        return set()
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except (ValueError, onnx.shape_inference.InferenceError):
        return set()
    return {vi.name for vi in [*g.value_info, *g.input, *g.output]
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in integer}


def import_onnx(model_or_path, input_shapes: dict | None = None, shapes_from_data: bool = False):
    """Import an ONNX model (ModelProto, serialized bytes or a path) as a float Graph. Models of opsets
    7..12 are upgraded first (mrt.onnx_import.opsets). input_shapes: {input name: per-sample shape}
    fixing symbolic dims (mrt.onnx_import.inputs); key "x" for a model with one input. shapes_from_data:
    the shapes were read from calibration data, whose other arrays (labels) are not inputs."""
    model = _load(model_or_path)
    check_onnx(model.graph)  # a graph too large is refused before any fold or upgrade reads it
    model = upgrade(functions.inline_local_functions(model))
    opsets = model_opsets(model)
    g = model.graph
    if g.sparse_initializer:
        raise UnsupportedOp("sparse initializers are not supported")
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    real_inputs = [vi for vi in g.input if vi.name not in consts]
    given = shapes_for(real_inputs, input_shapes, strict=not shapes_from_data)
    ctx = ImportContext(consts)
    ctx.onnx_model = model
    specs = []
    for vi in real_inputs:
        spec, axis = graph_input(vi, given.get(vi.name), unit_axis(vi, g))
        specs.append(spec)
        ctx.full[spec.name] = (BATCH, *spec.shape)
        forms.set_form(ctx, spec.name, axis)
    ctx.integer_tensors = integer_tensors(model) | {s.name for s in specs if s.dtype != "float32"}
    for node in g.node:
        _import_node(ctx, node, opsets)
    outputs = []
    for o in g.output:
        if o.name in ctx.optional_outputs:
            continue
        if o.name in ctx.dropped:
            raise UnsupportedOp(f"graph output {o.name!r}: {ctx.dropped[o.name]}")
        if ctx.is_const(o.name):
            raise UnsupportedOp(f"graph output {o.name!r} is a constant (does not depend on the "
                                "input)")
        if o.name not in ctx.full:
            raise UnsupportedOp(f"graph output {o.name!r} is not computed by the graph")
        outputs.append(o.name)
    if not outputs:
        raise UnsupportedOp("the model has no batched float output")
    _unit_outputs(ctx, outputs)
    try:
        axes = {name: forms.form(ctx, name) for name in [*(s.name for s in specs), *outputs]}
        return Graph(inputs=specs, outputs=outputs, initializers=ctx.initializers,
                     nodes=ctx.nodes, name=g.name or "graph", batch_axes={k: a for k, a in axes.items() if a != 0},
                     recurrent=frozenset(ctx.recurrent), integer_outputs=_integer_outputs(g, outputs))
    except GraphError as e:
        raise UnsupportedOp(f"imported graph is invalid: {e}") from e
