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


def _dense(ctx, node, w, b, post: str, out: str):
    """x @ w.T + b, then the post_transform (NONE or LOGISTIC / SOFTMAX as float ops)."""
    steps = {"NONE": [], "LOGISTIC": [("sigmoid", [], {})], "SOFTMAX": [("softmax", [], {"axis": 1})]}
    if post not in steps:
        raise UnsupportedOp(f"{where(node)}: post_transform {post!r} is not supported")
    inputs = [ctx.tensor(node.input[0], node), ctx.add_const(f"{out}/w", w), ctx.add_const(f"{out}/b", b)]
    if not steps[post]:
        ctx.emit("dense", inputs, {}, node, out=out)
        return
    ctx.emit_chain(steps[post], ctx.emit("dense", inputs, {}, node), node, out=out)


def linear_regressor(ctx, node, attrs):
    """LinearRegressor: y = x @ coefficients.reshape(targets, features).T + intercepts."""
    n_targets = int(attrs.get("targets", 1))
    n_features = ctx.shape(node.input[0], node)[-1]
    coefs = np.asarray(attrs.get("coefficients"), np.float64)
    b = np.asarray(attrs.get("intercepts") or [0.0] * n_targets, np.float64)
    if coefs.size != n_targets * n_features or b.size != n_targets:
        raise UnsupportedOp(f"{where(node)}: {coefs.size} coefficients and {b.size} intercepts do not fit "
                            f"{n_targets} targets of {n_features} features")
    _dense(ctx, node, coefs.reshape(n_targets, n_features), b, attrs.get("post_transform", "NONE"), node.output[0])


def _linear_kernel(node, attrs, n_features):
    """The support vectors of a LINEAR-kernel SVM ([vectors, features]); anything else is refused."""
    kernel = attrs.get("kernel_type", "LINEAR")
    attrs.ignore("kernel_params")  # gamma, coef0, degree: unused by the linear kernel
    if kernel != "LINEAR":
        raise UnsupportedOp(f"{where(node)}: kernel_type {kernel} is not supported (LINEAR only)")
    sv = np.asarray(attrs.get("support_vectors") or [], np.float64)
    if sv.size % n_features:
        raise UnsupportedOp(f"{where(node)}: {sv.size} support-vector values for {n_features} features")
    return sv.reshape(-1, n_features)


def svm_regressor(ctx, node, attrs):
    """SVMRegressor, linear kernel: y = sum_i coef_i <sv_i, x> + rho = x . (coef @ sv) + rho (or the
    coefficients themselves as weights when there are no support vectors)."""
    n_features = ctx.shape(node.input[0], node)[-1]
    sv = _linear_kernel(node, attrs, n_features)
    attrs.ignore("n_supports")
    if attrs.get("one_class", 0):
        raise UnsupportedOp(f"{where(node)}: one-class SVMs are not supported")
    coef = np.asarray(attrs.get("coefficients"), np.float64)
    w = coef @ sv if len(sv) else coef
    if w.size != n_features:
        raise UnsupportedOp(f"{where(node)}: {coef.size} coefficients do not fit {n_features} features")
    rho = np.asarray(attrs.get("rho") or [0.0], np.float64)
    _dense(ctx, node, w.reshape(1, -1), rho[:1], attrs.get("post_transform", "NONE"), node.output[0])


def binarizer(ctx, node, attrs):
    """Binarizer: 1 where x > threshold, else 0 (a comparison with a constant: one lookup table after
    univariate fusion)."""
    t = ctx.add_const(f"{node.output[0]}/threshold", np.asarray([attrs.get("threshold", 0.0)], np.float32))
    ctx.emit("greater", [ctx.tensor(node.input[0], node), t], {}, node, out=node.output[0])


HANDLERS = {  # the ml ops added after the three above (importer.py merges this table)
    "LinearRegressor": (linear_regressor, {1}),
    "SVMRegressor": (svm_regressor, {1}),
    "Binarizer": (binarizer, {1}),
}
