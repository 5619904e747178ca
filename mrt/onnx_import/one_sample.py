"""An ONNX graph is imported as what it computes for one sample; the CVM batch axis is a separate axis in front.

Every ONNX activation is one sample's tensor: all its dims are concrete (a symbolic batch is fixed at 1, other
symbolic dims from the calibration data or `--input-shape`), and every ONNX axis, axis 0 included, is an axis
the op works on. The IR gives each activation the CVM batch axis in front (`BATCH`, a stack of independent
samples no ONNX op sees) and stores the ONNX tensor in one of two forms:

- **unit axis k** (`ctx.batch_axes`, 0 where absent): the ONNX axis k has size 1 and is left out of the IR
  tensor, whose batch axis stands where it was: IR shape `(BATCH, *s without axis k)`. k = 0 is what an image or
  sequence model computes at batch 1, and the form every handler of this package is written for (batch_major
  translates k != 0, the sequence-first layouts of recurrent layers).
- **whole** (`ctx.whole`): IR shape `(BATCH, *s)`, every ONNX axis a per-sample axis.

A size-1 axis moves freely, so going from one form to the other is one IR reshape (`stored`), and the form is
a local choice made per node: a node is first imported with every input in a unit-axis form (the handler then
treats the unit axis as an independent axis of one element), and the result is kept only if the handler
accepted it and every output has the shape ONNX's own shape inference gives for one sample. Otherwise the import
is rolled back and the node is imported on whole tensors: its axis attributes and shape operands are translated
as if the ONNX graph had one more leading axis (`WHOLE`), which is the batch axis every handler expects. An op
whose CVM counterpart works on one [C, H, W] sample (Conv, pools, normalizations, Resize) has no whole form and
is refused by name when its input's axis 0 is not 1. Nothing here guesses which axis is a batch: each form is
exact for one sample, and a batch of requests is a stack of samples.
"""
from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from mrt.errors import UnsupportedOp
from mrt.graph import fresh_name
from mrt.onnx_import import batch_major, ops_index
from mrt.onnx_import.attrs import where
from mrt.onnx_import.forms import WHOLE, set_form, form, stored
from mrt.onnx_import import ops_tail
from mrt.onnx_import.whole_form import WHOLE_FORMS as PLAIN_WHOLE_FORMS

RECURRENT = ("LSTM", "GRU", "RNN")
# ops whose CVM counterparts take one image [C, H, W] (or one batch-first sequence): a sample holding n > 1 of
# them along ONNX axis 0 is imported item by item (sliced, imported, concatenated), for n up to MAX_ITEMS
PER_ITEM = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
            "GlobalLpPool", "BatchNormalization", "InstanceNormalization", "LRN", "Resize", "Upsample",
            "DepthToSpace", "SpaceToDepth", "GroupNormalization", "MaxRoiPool", "RoiAlign", *RECURRENT}
MAX_ITEMS = 64
INTEGER_TYPES = {TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
                 TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.BOOL}

WHOLE_FORMS = {**PLAIN_WHOLE_FORMS, **ops_tail.WHOLE_FORMS}  # op -> its translation to whole tensors


def as_batch(sample, axis):
    """One sample's ONNX array as a CVM batch of one (`axis`: the tensor's unit axis, Graph.unit_axis)."""
    a = np.asarray(sample)
    return a[None] if axis is WHOLE else np.moveaxis(a, axis, 0)


def as_sample(row, axis):
    """Sample b of a CVM output (`batch[b]`) as the ONNX array one sample's run gives."""
    a = np.asarray(row)
    return a if axis is WHOLE else np.expand_dims(a, axis)


def fold_shape(ctx, node, attrs):
    """Shape and Size of an activation are constants: one sample's shape is known."""
    s = ctx.onnx_shape(node.input[0], node)
    if node.op_type == "Size":
        ctx.consts[node.output[0]] = np.asarray(math.prod(s), np.int64)
        return
    start, end = attrs.get("start", 0), attrs.get("end", None)
    ctx.consts[node.output[0]] = np.asarray(s, np.int64)[start:end]


# -- what ONNX says one sample's outputs are -----------------------------------------------------------------

def expected_shapes(ctx, node, opsets) -> dict:
    """ONNX's own shape inference of the node on one sample's input shapes: {output: shape} where it is
    concrete, {} where it cannot tell (a custom domain, an inference error). Outputs it types as integers or
    booleans join ctx.integer_tensors."""
    domain = node.domain if node.domain != "ai.onnx" else ""
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets.get(domain, 1), domain)
        types, data = {}, {}
        for i in (i for i in node.input if i):
            if ctx.is_const(i):
                value = np.asarray(ctx.consts[i])
                elem = helper.np_dtype_to_tensor_dtype(value.dtype)
                if value.dtype.kind in "iub" and value.size <= 64:
                    data[i] = numpy_helper.from_array(value, i)
            else:
                value = None
                elem = TensorProto.INT64 if i in ctx.integer_tensors else TensorProto.FLOAT  # integer widths alike
            shape = value.shape if value is not None else ctx.onnx_shape(i, node)
            types[i] = helper.make_tensor_type_proto(elem, list(shape))
        imports = [helper.make_opsetid(d, v) for d, v in opsets.items()]
        if node.op_type == "STFT" and not any(a.name == "onesided" for a in node.attribute):
            node = onnx.NodeProto.FromString(node.SerializeToString())  # onnx 1.23 infers an unset onesided
            node.attribute.append(helper.make_attribute("onesided", 1))  # as 0; its default is 1
        out = onnx.shape_inference.infer_node_outputs(schema, node, types, data, opset_imports=imports)
    except Exception:  # noqa: BLE001 - inference is a check; where it fails the check is skipped
        return {}
    shapes = {}
    for name, t in out.items():
        tt = t.tensor_type
        if t.HasField("tensor_type") and tt.elem_type in INTEGER_TYPES:
            ctx.integer_tensors.add(name)  # what Cast and Div read (the whole-model inference may have failed)
        if t.HasField("tensor_type") and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[name] = tuple(d.dim_value for d in tt.shape.dim)
    return shapes


def _mismatch(ctx, node, expected):
    """The first output whose imported one-sample shape differs from ONNX's, as (name, got, want), or None. A
    unit-axis output with no other axis counts as one: its whole form keeps an axis, which reductions and
    reshapes need (CVM refuses a reduction or reshape to a sample of no axis)."""
    for out in node.output:
        if out and out in ctx.full and len(ctx.full[out]) == 1 and ctx.onnx_shape(out, node):
            return out, ctx.onnx_shape(out, node), "a sample of one axis at least"
        if out and out in ctx.full and out in expected and ctx.onnx_shape(out, node) != expected[out]:
            return out, ctx.onnx_shape(out, node), expected[out]
    return None


# -- the node import ------------------------------------------------------------------------------------------

class _NoWholeForm(UnsupportedOp):
    """The op has no whole-tensor import; the unit-axis attempt's error says more."""


def handle(ctx, node, attrs, handlers, opsets):
    """Import one node that reads an activation (see the module docstring)."""
    ctx.opsets = opsets
    if node.op_type in ("Shape", "Size") and node.domain in ("", "ai.onnx"):
        fold_shape(ctx, node, attrs)
        return
    domain = node.domain if node.domain != "ai.onnx" else ""
    handler = handlers[(domain, node.op_type)][0]
    expected = expected_shapes(ctx, node, opsets)
    acts = [i for i in node.input if i and not ctx.is_const(i)]
    if node.op_type in ops_index.HANDLERS and domain == "":
        handler(ctx, node, attrs)
        return
    if node.op_type in PER_ITEM:
        _per_item(ctx, node, attrs, handler)
        return
    first = None
    if all(form(ctx, i) is not WHOLE or ctx.onnx_shape(i, node)[:1] == (1,) for i in acts):
        mark = ctx.mark()
        try:
            _unit(ctx, node, attrs, handler, handlers)
            wrong = _mismatch(ctx, node, expected)
            if wrong is None:
                return
            first = UnsupportedOp(f"{where(node)}: output {wrong[0]!r} came out {list(wrong[1])}, ONNX computes "
                                  f"{wrong[2]} for one sample")
        except UnsupportedOp as e:
            first = e
        ctx.rollback(mark)
    try:
        _whole(ctx, node, attrs, handlers)
    except _NoWholeForm as e:
        raise (first or UnsupportedOp(str(e))) from None
    except UnsupportedOp as e:
        raise e from None
    wrong = _mismatch(ctx, node, expected)
    if wrong is not None:
        raise UnsupportedOp(f"{where(node)}: output {wrong[0]!r} came out {list(wrong[1])}, ONNX computes "
                            f"{wrong[2]} for one sample")


def _unit(ctx, node, attrs, handler, handlers):
    """The node on unit-axis forms: whole inputs whose axis 0 is 1 are stored with unit axis 0 first."""
    inputs = [stored(ctx, i, node, 0) if i and not ctx.is_const(i) and form(ctx, i) is WHOLE else i
              for i in node.input]
    if inputs != list(node.input):
        node = batch_major._with(node, inputs=inputs)
    if batch_major.reads_moved(ctx, node, attrs):
        batch_major.handle(ctx, node, attrs, handlers)
    else:
        handler(ctx, node, attrs)


def _item_axes(node, attrs):
    """({input position: ONNX axis of its items}, {output position: ONNX axis}) of a PER_ITEM op."""
    if node.op_type not in RECURRENT:
        return {0: 0}, {k: 0 for k in range(len(node.output))}
    if attrs.get("layout", 0) == 0:  # X [seq, n, in], states [dirs, n, hidden]; Y [seq, dirs, n, hidden]
        return {0: 1, 5: 1, 6: 1}, {0: 2, 1: 1, 2: 1}
    return {0: 0, 5: 0, 6: 0}, {0: 0, 1: 0, 2: 0}


def _per_item(ctx, node, attrs, handler):
    """A PER_ITEM op: at once where its sample holds one item, else once per item, the results concatenated."""
    ins, outs = _item_axes(node, attrs)
    first = ctx.onnx_shape(node.input[0], node) if not ctx.is_const(node.input[0]) else ()
    n = first[ins[0]] if len(first) > ins[0] else 1
    if n == 1:
        _unit_items(ctx, node, attrs, handler, ins)
        return
    if n > MAX_ITEMS:
        raise UnsupportedOp(f"{where(node)}: one sample holds {n} items on ONNX axis {ins[0]} (input "
                            f"{list(first)}); {node.op_type} is imported per item, at most {MAX_ITEMS}")
    pieces = {k: [] for k, o in enumerate(node.output) if o}
    for i in range(n):
        inputs = [_item(ctx, name, node, ins[k], i) if k in ins and name and not ctx.is_const(name) else name
                  for k, name in enumerate(node.input)]
        outputs = [fresh_name(f"{o}/item{i}", ctx.taken()) if o else "" for o in node.output]
        _unit_items(ctx, batch_major._with(node, inputs=inputs, outputs=outputs), attrs, handler, ins)
        for k in pieces:
            if outputs[k] in ctx.dropped:
                ctx.drop(node.output[k], ctx.dropped[outputs[k]], outputs[k] in ctx.optional_outputs)
            else:
                pieces[k].append(stored(ctx, outputs[k], node, WHOLE))
    for k, parts in pieces.items():
        if parts:
            ctx.emit("concat", parts, {"axis": outs.get(k, 0) + 1}, node, out=node.output[k])
            set_form(ctx, node.output[k], WHOLE)


def _item(ctx, name, node, axis, i):
    """Item i of an activation along ONNX axis `axis` (whole form, that axis of size 1)."""
    whole = stored(ctx, name, node, WHOLE)
    piece = fresh_name(f"{name}/item{i}", ctx.taken())
    ctx.emit("slice", [whole], {"axes": (axis + 1,), "starts": (i,), "ends": (i + 1,), "steps": (1,)}, node,
             out=piece)
    set_form(ctx, piece, WHOLE)
    return piece


def _unit_items(ctx, node, attrs, handler, ins):
    """The op on inputs whose item axis has size 1, stored with that axis as the unit axis."""
    inputs = list(node.input)
    for k, axis in ins.items():
        if k < len(inputs) and inputs[k] and not ctx.is_const(inputs[k]) and form(ctx, inputs[k]) != axis:
            inputs[k] = stored(ctx, inputs[k], node, axis)
    handler(ctx, batch_major._with(node, inputs=inputs) if inputs != list(node.input) else node, attrs)


def _whole(ctx, node, attrs, handlers):
    translate = WHOLE_FORMS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
    if translate is None:
        shapes = [list(ctx.onnx_shape(i, node)) for i in node.input if i and not ctx.is_const(i)]
        raise _NoWholeForm(f"{where(node)}: {node.op_type} works on one sample's ONNX axis 0 as a batch, but its "
                           f"input {shapes[0] if shapes else '?'} has more than one entry there")
    values = batch_major._Plain(node)
    translated = translate(ctx, node, values)
    attrs.ignore(*[a.name for a in node.attribute])
    handlers[("", translated.op_type)][0](ctx, translated, batch_major._Plain(translated))
    for out in translated.output:
        if out in ctx.full:
            set_form(ctx, out, WHOLE)
