"""ONNX ops that ONNX itself defines as a function of other ops (Attention, RMSNormalization, RotaryEmbedding,
NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss, GroupNormalization, CenterCropPad, Mish, Shrink, ...) and
functions a model defines locally (model.functions: what torch's and onnxscript's exporters write for a
module kept whole) import as their bodies: the importer needs no handler of its own for them, and a body is
exactly the standard's meaning of the op, so its integer form is as faithful as the body's ops are.

`expand(node, opsets, types)` gives the body's nodes with the node's inputs, outputs and attributes bound in,
every internal name made unique by the node's name, and the opsets the body is written in. A context-dependent
body (one that depends on the input types or attribute values, as Attention's does) is built from the element
types of the node's inputs (`types`: ONNX name -> TensorProto element type); `body_types` then infers the element
types of the body's own tensors, so that integer tensors inside a body (class indices) are known as such.
"""
from __future__ import annotations

import onnx
import onnx.inliner
from onnx import TensorProto, helper

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where


def inline_local_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every call of a model-local function replaced by the function's body (onnx.inliner)."""
    if not model.functions:
        return model
    try:
        return onnx.inliner.inline_local_functions(model)
    except Exception as e:  # noqa: BLE001 - the inliner raises several types on a malformed function
        raise UnsupportedOp(f"the model's local functions cannot be inlined: {e}") from None


def _schema(node, opsets):
    domain = node.domain if node.domain != "ai.onnx" else ""
    try:
        return onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
    except onnx.defs.SchemaError:
        return None


def has_body(node, opsets) -> bool:
    """Whether the ONNX standard defines the node's op, at the model's opset, by a function body."""
    schema = _schema(node, opsets)
    return schema is not None and (schema.has_function or schema.has_context_dependent_function)


def _body(ctx, node, opsets, types) -> onnx.FunctionProto:
    schema = _schema(node, opsets)
    domain = node.domain if node.domain != "ai.onnx" else ""
    opset = opsets.get(domain, 1)
    function = onnx.FunctionProto()
    if schema.has_function:
        versions = schema.function_opset_versions
        version = max((v for v in versions if v <= opset), default=min(versions))
        function.ParseFromString(schema.get_function_with_opset_version(version))
        return function
    versions = schema.context_dependent_function_opset_versions
    version = max((v for v in versions if v <= opset), default=min(versions))
    type_protos = [_type_proto(ctx, node, i, types) for i in node.input]
    built = schema.get_context_dependent_function_with_opset_version(version, node.SerializeToString(), type_protos)
    if not built:
        raise UnsupportedOp(f"{where(node)}: ONNX gives no function body for {node.op_type} with these inputs")
    function.ParseFromString(built)
    return function


def _type_proto(ctx, node, name, types) -> bytes:
    """An input's type as a context-dependent body reads it: element type and one sample's ONNX shape."""
    if not name:
        return onnx.TypeProto().SerializeToString()
    shape = ctx.consts[name].shape if ctx.is_const(name) else ctx.onnx_shape(name, node)
    return helper.make_tensor_type_proto(types.get(name, TensorProto.FLOAT), shape).SerializeToString()


def _bound_attributes(function, node, schema):
    """The attribute values the body's @references read: the node's, else the function's or the schema's
    defaults."""
    values = {name: a.default_value for name, a in schema.attributes.items() if a.default_value.name}
    values.update({a.name: a for a in function.attribute_proto})
    values.update({a.name: a for a in node.attribute})
    return values


def _bind_node(inner, rename, attributes):
    out = onnx.NodeProto()
    out.CopyFrom(inner)
    out.input[:] = [rename(i) if i else "" for i in inner.input]
    out.output[:] = [rename(o) if o else "" for o in inner.output]
    del out.attribute[:]
    for a in inner.attribute:
        if a.ref_attr_name:
            if a.ref_attr_name not in attributes:
                continue  # unset and without a default: the inner op's own default applies
            bound = onnx.AttributeProto()
            bound.CopyFrom(attributes[a.ref_attr_name])
            bound.name = a.name
            out.attribute.append(bound)
        elif a.type == onnx.AttributeProto.GRAPH:  # a Loop, Scan or If in the body (Range's, LinearAttention's)
            bound = onnx.AttributeProto()
            bound.CopyFrom(a)
            bound.g.CopyFrom(_bind_graph(a.g, rename))
            out.attribute.append(bound)
        elif a.type == onnx.AttributeProto.GRAPHS:
            raise UnsupportedOp(f"node {inner.name or inner.op_type!r} in a function body holds a list of graphs")
        else:
            out.attribute.append(a)
    return out


def _bind_graph(graph, rename):
    """A subgraph of a body with the names it reads from the body (not defined inside it) bound as the body's."""
    bound = onnx.GraphProto()
    bound.CopyFrom(graph)
    defined = {v.name for v in bound.input} | {t.name for t in bound.initializer} | \
              {o for n in bound.node for o in n.output}

    def outer(name):
        return name if not name or name in defined else rename(name)

    for n in bound.node:
        n.input[:] = [outer(i) for i in n.input]
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                a.g.CopyFrom(_bind_graph(a.g, outer))
    for o in bound.output:
        o.name = outer(o.name)
    return bound


def expand(ctx, node, opsets, types) -> tuple[list, dict]:
    """(the body's nodes bound to `node`, the opsets to import them with)."""
    function = _body(ctx, node, opsets, types)
    prefix = f"{node.name or node.op_type}/{node.op_type}."
    binding = dict(zip(function.input, list(node.input) + [""] * (len(function.input) - len(node.input))))
    binding.update(zip(function.output, node.output))

    def rename(name):
        return binding[name] if name in binding else prefix + name

    attributes = _bound_attributes(function, node, _schema(node, opsets))
    nodes = []
    for k, inner in enumerate(function.node):
        bound = _bind_node(inner, rename, attributes)
        bound.name = f"{prefix}{inner.name or inner.op_type}_{k}"
        nodes.append(bound)
    inner_opsets = dict(opsets)
    inner_opsets.update({(o.domain if o.domain != "ai.onnx" else ""): o.version for o in function.opset_import})
    return nodes, inner_opsets


def elem_types(ctx) -> dict:
    """ONNX name -> element type of the model's tensors (ONNX's type inference, once per import), for the
    context-dependent bodies; a constant's type is its value's."""
    if ctx.elem_types is None:
        model = ctx.onnx_model
        declared = {vi.name: vi.type.tensor_type.elem_type for vi in model.graph.input}
        try:
            inferred = onnx.shape_inference.infer_shapes(model).graph
            declared.update({vi.name: vi.type.tensor_type.elem_type for vi in inferred.value_info
                             if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type})
        except Exception:  # noqa: BLE001 - a model inference cannot read (over 2 GiB): declared types only
            pass
        ctx.elem_types = declared
    for name, value in ctx.consts.items():
        if name not in ctx.elem_types:
            ctx.elem_types[name] = helper.np_dtype_to_tensor_dtype(value.dtype)
    return ctx.elem_types


def body_types(nodes, opsets, types) -> dict:
    """ONNX name -> element type of the body's tensors, from ONNX's type inference over the body with its
    inputs' element types (an empty dict where inference fails: the caller then knows no more than before)."""
    produced = {o for n in nodes for o in n.output if o}
    read = [i for n in nodes for i in n.input if i and i not in produced]
    inputs = [helper.make_tensor_value_info(i, types.get(i, TensorProto.FLOAT), None) for i in dict.fromkeys(read)]
    outputs = [helper.make_empty_tensor_value_info(o) for o in produced]
    graph = helper.make_graph(nodes, "body", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - inference is a help here, never a requirement
        return {}
    return {vi.name: vi.type.tensor_type.elem_type for vi in [*inferred.value_info, *inferred.output]
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type}
