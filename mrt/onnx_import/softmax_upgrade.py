"""Undo onnx.version_converter's Softmax 12 -> 13 detour where it changes nothing.

Before opset 13, Softmax/LogSoftmax/Hardmax(axis=a) flatten the input to 2-D at a and normalise the
second axis; the converter writes that literally: Shape(x), Flatten(x, axis=a), Softmax(axis=-1),
Reshape(., Shape(x)). A Flatten merges the batch axis with others unless a = 1, so the import refuses
it. When the old node normalised over the last axis only (axis = -1, or a = rank - 1), the old and the
new operator agree, and the four nodes are one opset-13 node over the last axis (PaddleOCR's recogniser
writes its attention softmax this way)."""
from __future__ import annotations

import onnx

NORMALISERS = ("Softmax", "LogSoftmax", "Hardmax")


def _axis(node: onnx.NodeProto, default: int) -> int:
    return next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), default)


ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "MatMul", "Relu", "Sigmoid", "Tanh", "Clip", "Erf", "Sqrt",
               "Softmax", "LogSoftmax", "Hardmax", "Slice", "Cast", "Identity", "Dropout", "HardSigmoid",
               "HardSwish", "BatchNormalization", "Where", "Neg", "Exp"}


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    """Ranks of the old model's tensors: shape inference's, and where it leaves them unknown (a Reshape
    to a computed shape), a walk that knows a Transpose's rank from its perm, keeps it through
    rank-preserving ops, counts (Un)Squeeze axes and takes the larger of a broadcast's or a MatMul's inputs."""
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - the walk alone
        g = model.graph
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in [*g.value_info, *g.input, *g.output]
             if vi.type.tensor_type.HasField("shape")}
    ranks.update({t.name: len(t.dims) for t in model.graph.initializer})
    for n in model.graph.node:
        if not n.output or n.output[0] in ranks:
            continue
        known = [ranks[i] for i in n.input[:2] if i in ranks]
        if n.op_type == "Transpose" and _axis(n, None) is None:
            perm = next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "perm"), None)
            if perm:
                ranks[n.output[0]] = len(perm)
        elif n.op_type in ("Squeeze", "Unsqueeze") and known and len(n.input) == 1:  # opset < 13: axes attribute
            axes = next((onnx.helper.get_attribute_value(a) for a in n.attribute if a.name == "axes"), None)
            if axes is not None:
                ranks[n.output[0]] = known[0] + (len(axes) if n.op_type == "Unsqueeze" else -len(axes))
        elif n.op_type in ELEMENTWISE and known and len(known) == len([i for i in n.input[:2] if i]):
            ranks[n.output[0]] = max(known)
    return ranks


def last_axis_normalisers(old: onnx.ModelProto, new: onnx.ModelProto) -> None:
    """Rewrite `new` (the converter's output) in place: each Flatten -> normaliser -> Reshape(Shape(x))
    made from an old last-axis normaliser (found by output name) becomes the opset-13 normaliser on x."""
    ranks = _ranks(old)
    last = {n.output[0] for n in old.graph.node if n.op_type in NORMALISERS
            and (_axis(n, 1) == -1 or _axis(n, 1) == ranks.get(n.input[0], 0) - 1)}
    nodes = list(new.graph.node)
    producer = {o: n for n in nodes for o in n.output}
    readers: dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    dropped = set()
    for reshape in nodes:
        if reshape.op_type != "Reshape" or reshape.output[0] not in last:
            continue
        norm = producer.get(reshape.input[0])
        flat = producer.get(norm.input[0]) if norm is not None and norm.op_type in NORMALISERS else None
        shape = producer.get(reshape.input[1])
        if flat is None or flat.op_type != "Flatten" or shape is None or shape.op_type != "Shape":
            continue
        if shape.input[0] != flat.input[0] or readers.get(norm.output[0]) != 1 or readers.get(flat.output[0]) != 1:
            continue
        norm.input[0] = flat.input[0]
        norm.output[0] = reshape.output[0]
        for a in [a for a in norm.attribute if a.name == "axis"]:
            norm.attribute.remove(a)
        norm.attribute.append(onnx.helper.make_attribute("axis", -1))
        dropped |= {id(flat), id(reshape)} | ({id(shape)} if readers.get(shape.output[0]) == 1 else set())
    if dropped:
        kept = [n for n in nodes if id(n) not in dropped]
        del new.graph.node[:]
        new.graph.node.extend(kept)
