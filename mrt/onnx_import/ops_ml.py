"""Importers for the scikit-learn ops skl2onnx emits (domain ai.onnx.ml): Scaler,
LinearClassifier and Normalizer.

A LinearClassifier becomes a dense layer producing the class scores, followed by its
post_transform; its label output (an argmax over labels) has no IR counterpart and is dropped, so
the graph's output is the scores/probabilities tensor. Binary classifiers with a single score
column are expanded to two columns exactly as onnxruntime does:
  post_transform LOGISTIC           -> [1 - sigmoid(s), sigmoid(s)] = sigmoid([-s, s])
  NONE, SOFTMAX, SOFTMAX_ZERO       -> [1 - s, s]   (onnxruntime applies no softmax here)
"""
import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where


def scaler(ctx, node, attrs):
    """Scaler: y = (x - offset) * scale, per feature (or one value for all)."""
    x = node.input[0]
    n = ctx.shape(x, node)[-1]
    offset = np.asarray(attrs.get("offset", [0.0]), np.float32)
    scale = np.asarray(attrs.get("scale", [1.0]), np.float32)
    for what, v in (("offset", offset), ("scale", scale)):
        if v.size not in (1, n):
            raise UnsupportedOp(f"{where(node)}: {what} has {v.size} values for {n} features")
    sub = ctx.emit("sub", [ctx.tensor(x, node), ctx.add_const(f"{node.output[0]}/offset", offset)],
                   {}, node)
    ctx.emit("mul", [sub, ctx.add_const(f"{node.output[0]}/scale", scale)], {}, node,
             out=node.output[0])


def linear_classifier(ctx, node, attrs):
    x = node.input[0]
    attrs.ignore("multi_class")  # onnxruntime's scores do not depend on it
    labels = attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or []
    post = attrs.get("post_transform", "NONE")
    intercepts = np.asarray(attrs.get("intercepts", []), np.float64)
    coefs = np.asarray(attrs.get("coefficients"), np.float64)
    n_features = ctx.shape(x, node)[-1]
    n_targets = coefs.size // n_features
    if coefs.size != n_targets * n_features or intercepts.size not in (0, n_targets):
        raise UnsupportedOp(f"{where(node)}: {coefs.size} coefficients and {intercepts.size} "
                            f"intercepts do not fit {n_features} features")
    w = coefs.reshape(n_targets, n_features)
    b = intercepts if intercepts.size else np.zeros(n_targets)
    label_out, scores_out = node.output[0], node.output[1]
    if label_out:
        ctx.drop(label_out, "the LinearClassifier label output is not imported (MRT keeps the "
                 "scores; take their argmax)", optional_output=True)
    if n_targets == 1 and len(labels) == 2:
        if post == "LOGISTIC":
            w, b, post = np.concatenate([-w, w]), np.array([-b[0], b[0]]), "LOGISTIC"
        elif post in ("NONE", "SOFTMAX", "SOFTMAX_ZERO"):
            w, b, post = np.concatenate([-w, w]), np.array([1 - b[0], b[0]]), "NONE"
    elif n_targets != len(labels):
        raise UnsupportedOp(f"{where(node)}: {n_targets} score columns for {len(labels)} classes")
    steps = {"NONE": [], "LOGISTIC": [("sigmoid", [], {})],
             "SOFTMAX": [("softmax", [], {"axis": 1})]}
    if post not in steps:
        raise UnsupportedOp(f"{where(node)}: post_transform {post!r} is not supported")
    inputs = [ctx.tensor(x, node), ctx.add_const(f"{scores_out}/w", w),
              ctx.add_const(f"{scores_out}/b", b)]
    if not steps[post]:
        ctx.emit("dense", inputs, {}, node, out=scores_out)
        return
    raw = ctx.emit("dense", inputs, {}, node)
    ctx.emit_chain(steps[post], raw, node, out=scores_out)


def normalizer(ctx, node, attrs):
    """Normalizer L1 right after a softmax is the identity (softmax rows already sum to 1) and
    is dropped; any other use becomes a `normalize` node."""
    x = node.input[0]
    norm = attrs.get("norm", "MAX").lower()
    src = ctx.tensor(x, node)
    producer = next((n for n in ctx.nodes if src in n.outputs), None)
    if norm == "l1" and producer is not None and producer.op == "softmax" and \
            producer.attrs["axis"] == len(ctx.shape(x, node)) - 1:
        ctx.emit("identity", [src], {}, node, out=node.output[0])
        return
    ctx.emit("normalize", [src], {"norm": norm}, node, out=node.output[0])


HANDLERS = {}  # the ml ops added after the three above (importer.py merges this table)
