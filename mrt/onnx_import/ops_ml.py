"""Importers for the scikit-learn ops skl2onnx emits (domain ai.onnx.ml): Scaler,
LinearClassifier and Normalizer.

A LinearClassifier becomes a dense layer producing the class scores, followed by its
post_transform; its label output (an argmax over labels) has no IR counterpart and is dropped, so
the graph's output is the scores/probabilities tensor. Binary classifiers with a single score
column are expanded to two columns exactly as onnxruntime does:
  post_transform LOGISTIC           -> [1 - sigmoid(s), sigmoid(s)] = sigmoid([-s, s])
  NONE, SOFTMAX, SOFTMAX_ZERO       -> [1 - s, s]   (onnxruntime applies no softmax here)
"""
import math

import numpy as np

from mrt.errors import UnsupportedOp
from mrt.onnx_import.attrs import where
from mrt.onnx_import.ops_shape import _pick


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
    producer = ctx.producer(src)
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


def svm_classifier(ctx, node, attrs):
    """SVMClassifier with a LINEAR kernel, in the two layouts onnxruntime reads (svmclassifier.cc):

    * SVC (vectors_per_class set; skl2onnx's SVC(kernel='linear')): one-vs-one. Pair (i, j), i < j, scores
      s_ij = sum over i's vectors of coefficients[j-1][m] <sv_m, x> + sum over j's vectors of
      coefficients[i][m] <sv_m, x> + rho[pair]; with a linear kernel that is one dense row x . w_ij + rho.
      onnxruntime's label is the class with most votes, a vote going to i when s_ij > 0, else to j (ties:
      the first class). More than two classes: the scores output is the pairs' s_ij (what skl2onnx's
      ovr subgraph reads). Two classes: onnxruntime writes [-s, s] while its label is class 0 when s > 0,
      i.e. its score columns are the reverse of its own label; the import writes [s, -s], so that the
      argmax of the scores is onnxruntime's (and scikit-learn's) label (documented departure: the
      decision is what the model means; s = 0 exactly is the one tie, broken the other way).
    * LINEAR (no support vectors; liblinear layout): scores = x @ coefficients.reshape(C, F).T + rho[0]
      and the label their argmax, for C > 2 (the binary LINEAR label rule is not an argmax: refused).
    Probability outputs (prob_a / prob_b: an iterative pairwise coupling) and post_transforms are refused.
    """
    n_features = ctx.shape(node.input[0], node)[-1]
    sv = _linear_kernel(node, attrs, n_features)
    labels = attrs.get("classlabels_ints") or attrs.get("classlabels_strings") or []
    k = len(labels)
    per_class = [int(v) for v in attrs.get("vectors_per_class") or []]
    coef = np.asarray(attrs.get("coefficients"), np.float64)
    rho = np.asarray(attrs.get("rho") or [], np.float64)
    if attrs.get("prob_a") or attrs.get("prob_b"):
        raise UnsupportedOp(f"{where(node)}: probability outputs (prob_a/prob_b) are not supported; export "
                            "the SVC without probability=True")
    if attrs.get("post_transform", "NONE") != "NONE":
        raise UnsupportedOp(f"{where(node)}: post_transform {attrs.get('post_transform')} is not supported (NONE)")
    if k < 2:
        raise UnsupportedOp(f"{where(node)}: {k} class labels; a classifier needs at least 2")
    if node.output[0]:
        ctx.drop(node.output[0], "the SVMClassifier label output is not imported (MRT keeps the scores; take "
                 "their argmax, or count the pairwise votes for more than two classes)", optional_output=True)
    if not per_class:   # liblinear layout
        if k == 2 or coef.size != k * n_features or rho.size < 1:
            raise UnsupportedOp(f"{where(node)}: a LINEAR-mode SVMClassifier needs more than 2 classes and "
                                f"{k} x {n_features} coefficients, got {k} classes and {coef.size}")
        _dense(ctx, node, coef.reshape(k, n_features), np.full(k, rho[0]), "NONE", node.output[1])
        return
    start = np.concatenate([[0], np.cumsum(per_class)])
    pairs = k * (k - 1) // 2
    if len(per_class) != k or len(sv) != start[-1] or coef.size != (k - 1) * len(sv) or rho.size != pairs:
        raise UnsupportedOp(f"{where(node)}: vectors_per_class {per_class}, {len(sv)} support vectors, "
                            f"{coef.size} coefficients and {rho.size} rho values do not fit {k} classes")
    coef = coef.reshape(k - 1, len(sv))
    w = []
    for i in range(k - 1):
        for j in range(i + 1, k):
            vi, vj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            w.append(coef[j - 1, vi] @ sv[vi] + coef[i, vj] @ sv[vj])
    w = np.asarray(w)
    if k == 2:
        w, rho = np.concatenate([w, -w]), np.array([rho[0], -rho[0]])
    _dense(ctx, node, w, rho, "NONE", node.output[1])


def _labels_by_index(ctx, node):
    """ArrayFeatureExtractor of a constant 1-D table by computed indices (skl2onnx's class label: the classes
    picked by an argmax): an embedding lookup of each index, as onnxruntime gives it, (1, number of indices)."""
    table = np.asarray(ctx.const(node.input[0], node, "ArrayFeatureExtractor table"))
    if table.ndim != 1:
        raise UnsupportedOp(f"{where(node)}: computed indices into a table of shape {list(table.shape)} (a 1-D "
                            "table of labels is supported)")
    idx = ctx.shape(node.input[1], node)
    y = ctx.emit("embed", [ctx.tensor(node.input[1], node), ctx.add_const(f"{node.output[0]}/table",
                                                                         table.astype(np.float32).reshape(-1, 1))],
                 {}, node)
    ctx.emit("reshape", [y], {"shape": (math.prod(idx[1:]),)}, node, out=node.output[0])


def array_feature_extractor(ctx, node, attrs):
    """ArrayFeatureExtractor with constant indices: those columns of the last axis (skl2onnx writes it to
    pick one column of a score matrix, e.g. in the ovr decision of a multiclass SVC); with computed indices into
    a constant table of labels, _labels_by_index."""
    if not ctx.is_const(node.input[1]) and ctx.is_const(node.input[0]):
        return _labels_by_index(ctx, node)
    full = ctx.shape(node.input[0], node)
    idx = np.asarray(ctx.const(node.input[1], node, "ArrayFeatureExtractor indices")).astype(np.int64).ravel()
    if len(full) < 2 or idx.size == 0 or idx.min() < 0 or idx.max() >= full[-1]:
        raise UnsupportedOp(f"{where(node)}: indices {idx.tolist()[:8]} do not fit the last axis of {full}")
    _pick(ctx, node, ctx.tensor(node.input[0], node), len(full) - 1, idx.tolist(), out=node.output[0])


def sum_(ctx, node, attrs):
    """Sum (ai.onnx): the inputs added left to right (broadcast as Add does)."""
    names = [ctx.tensor(i, node) for i in node.input]
    acc = names[0]
    if len(names) == 1:
        ctx.emit("identity", [acc], {}, node, out=node.output[0])
        return
    for k, other in enumerate(names[1:], start=2):
        acc = ctx.emit("add", [acc, other], {}, node, out=node.output[0] if k == len(names) else None)


HANDLERS = {  # the ml ops added after the three above (importer.py merges this table)
    "LinearRegressor": (linear_regressor, {1}),
    "SVMRegressor": (svm_regressor, {1}),
    "SVMClassifier": (svm_classifier, {1}),
    "ArrayFeatureExtractor": (array_feature_extractor, {1}),
    "Binarizer": (binarizer, {1}),
}

ONNX_HANDLERS = {  # default-domain ops skl2onnx writes around the ml ops
    "Sum": (sum_, {8, 13}),
}
