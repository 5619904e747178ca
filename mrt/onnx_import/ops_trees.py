"""Importers for the ai.onnx.ml tree ensembles: TreeEnsembleClassifier / TreeEnsembleRegressor (ml
opsets 1 and 3, float or `_as_tensor` double attributes) and TreeEnsemble (ml opset 5). Each becomes one
`tree_ensemble` float node (mrt.trees.ensemble: the normalized form) followed by the post_transform.

The classifier's scores follow onnxruntime: base values plus the sum of the reached leaves' class weights.
When every weight is for one class id of a two-class model (gradient boosting's single margin `s`), the
scores are expanded to two columns exactly as onnxruntime does: [1 - s, s] with post_transform NONE,
[-s, s] otherwise (then LOGISTIC gives [1 - sigmoid(s), sigmoid(s)]); the expansion is folded into the
leaf values, so the graph still has one tree node. The label output (an argmax of the scores) is not
imported: the graph's output is the scores tensor and a caller takes its argmax.
"""
import numpy as np
from onnx import numpy_helper

from mrt.errors import UnsupportedOp
from mrt.graph import fresh_name
from mrt.onnx_import.attrs import where
from mrt.trees.ensemble import LEAF, Split, build
from mrt.trees.scaler_fold import STEPS, fold

POST = {"NONE": [], "LOGISTIC": [("sigmoid", [], {})], "SOFTMAX": [("softmax", [], {"axis": 1})]}
# TreeEnsemble (ml opset 5) enums
MODES_V5 = {0: "BRANCH_LEQ", 1: "BRANCH_LT", 2: "BRANCH_GTE", 3: "BRANCH_GT", 4: "BRANCH_EQ", 5: "BRANCH_NEQ",
            6: "BRANCH_MEMBER"}
POST_V5 = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}
AGGREGATE_V5 = {0: "AVERAGE", 1: "SUM", 2: "MIN", 3: "MAX"}


def _floats(attrs, name):
    """A float list attribute or its `_as_tensor` double form (None when neither is set)."""
    tensor = attrs.get(f"{name}_as_tensor")
    if tensor is not None:
        return numpy_helper.to_array(tensor).astype(np.float64).ravel()
    value = attrs.get(name)
    return None if value is None else np.asarray(value, np.float64)


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def _classic_trees(node, attrs, prefix: str):
    """Per tree (root, {node id: Split}, {node id: {target: weight}}) from the nodes_* and
    {prefix}_* attributes of TreeEnsembleClassifier / TreeEnsembleRegressor."""
    attrs.ignore("nodes_hitrates", "nodes_hitrates_as_tensor", "nodes_missing_value_tracks_true")
    tree_ids, node_ids = attrs.get("nodes_treeids") or [], attrs.get("nodes_nodeids") or []
    modes = [_text(m) for m in attrs.get("nodes_modes") or []]
    features, values = attrs.get("nodes_featureids") or [], _floats(attrs, "nodes_values")
    true_ids, false_ids = attrs.get("nodes_truenodeids") or [], attrs.get("nodes_falsenodeids") or []
    n = len(tree_ids)
    if not n or any(len(a) != n for a in (node_ids, modes, features, true_ids, false_ids)) or \
            values is None or len(values) != n:
        raise UnsupportedOp(f"{where(node)}: the nodes_* attributes must be non-empty and of one length")
    splits, leaves = {}, {}
    for i in range(n):
        key = (int(tree_ids[i]), int(node_ids[i]))
        if modes[i] == LEAF:
            leaves.setdefault(key, {})
        else:
            splits[key] = Split(int(features[i]), float(values[i]), modes[i], (key[0], int(true_ids[i])),
                                (key[0], int(false_ids[i])))
    w_tree, w_node = attrs.get(f"{prefix}_treeids") or [], attrs.get(f"{prefix}_nodeids") or []
    w_ids, w = attrs.get(f"{prefix}_ids") or [], _floats(attrs, f"{prefix}_weights")
    w = np.zeros(0) if w is None else w
    if not len(w_tree) == len(w_node) == len(w_ids) == len(w):
        raise UnsupportedOp(f"{where(node)}: the {prefix}_* attributes must be of one length")
    for t, k, target, v in zip(w_tree, w_node, w_ids, w):
        key = (int(t), int(k))
        if key not in leaves:
            raise UnsupportedOp(f"{where(node)}: a weight names node {key}, which is not a leaf")
        leaves[key][int(target)] = leaves[key].get(int(target), 0.0) + float(v)
    return _per_tree(node, splits, leaves), sorted({int(t) for t in w_ids})


def _per_tree(node, splits: dict, leaves: dict):
    """Group nodes by tree; a tree's root is its one node no other node points to."""
    children = {c for s in splits.values() for c in (s.true_child, s.false_child)}
    trees = {}
    for key in [*splits, *leaves]:
        trees.setdefault(key[0], []).append(key)
    out = []
    for t in sorted(trees):
        roots = [k for k in trees[t] if k not in children]
        if len(roots) != 1:
            raise UnsupportedOp(f"{where(node)}: tree {t} has {len(roots)} roots")
        mine = set(trees[t])
        out.append((roots[0], {k: s for k, s in splits.items() if k in mine},
                    {k: v for k, v in leaves.items() if k in mine}))
    return out


def _emit(ctx, node, ensemble, post: str, out: str):
    if post not in POST:
        raise UnsupportedOp(f"{where(node)}: post_transform {post!r} is not supported (only {', '.join(POST)})")
    folded = ctx.__dict__.get("tree_scaler_folds", {}).get(node.input[0])
    if folded is not None:   # a Scaler another tree ensemble already folded
        x, ensemble = folded[0], fold(ensemble, folded[1])
    else:
        x = ctx.tensor(node.input[0], node)
        if len(ctx.shape(node.input[0], node)) != 2:
            raise UnsupportedOp(f"{where(node)}: the input must be [batch, features]")
        x, ensemble = _fold_scaler(ctx, x, ensemble)
    names = []
    for label, value in zip(("feature", "threshold", "strict", "left", "right", "leaves", "base"),
                            ensemble.constants()):
        name = fresh_name(f"{out}/{label}", ctx.taken())
        ctx.initializers[name] = np.ascontiguousarray(value)
        names.append(name)
    if not POST[post]:
        ctx.emit("tree_ensemble", [x, *names], {}, node, out=out)
        return
    raw = ctx.emit("tree_ensemble", [x, *names], {}, node)
    ctx.emit_chain(POST[post], raw, node, out=out)


def _fold_scaler(ctx, x: str, ensemble):
    """(input, ensemble) with per-feature affine steps in front folded into the thresholds
    (mrt.trees.scaler_fold): while x is add / sub / mul / div (or identity) of a batched tensor and a
    constant of one value per feature (what the Scaler importer and skl2onnx's MinMaxScaler emit), the trees
    read that tensor instead. The folded nodes leave the graph and the scaled output is dropped with a
    reason (the raw input is sent as threshold codes, so nothing else can read its scaled form); another
    tree ensemble on the same scaled tensor reuses the fold (_emit)."""
    producer = {o: n for n in ctx.nodes for o in n.outputs}
    n = ctx.full[x][-1]
    steps, chain, src = [], [], x
    while src in producer and src not in ctx.dropped:
        node = producer[src]
        if node.op == "identity":
            c = None
        elif node.op in STEPS and len(node.inputs) == 2 and node.inputs[1] in ctx.initializers \
                and node.inputs[0] in ctx.full:
            c = np.asarray(ctx.initializers[node.inputs[1]], np.float32).ravel()
            if c.size not in (1, n) or not np.isfinite(c).all() or (node.op == "div" and (c == 0).any()):
                break
        else:
            break
        readers = [m for m in ctx.nodes if src in m.inputs]
        if src != x and len(readers) > 1:
            break   # an intermediate feeds something else too
        chain.append(node)
        if c is not None:
            steps.insert(0, (node.op, np.broadcast_to(c, (n,)).copy()))
        src = node.inputs[0]
    if not steps or any(x in m.inputs for m in ctx.nodes):
        return x, ensemble   # nothing to fold, or the scaled features feed something else (refused later)
    ctx.nodes = [m for m in ctx.nodes if all(m is not c for c in chain)]
    for node in chain:
        del ctx.full[node.outputs[0]]
    ctx.drop(x, "these scaled features were folded into a tree ensemble's thresholds (the raw input is sent "
             "as threshold codes); only tree ensembles may read them")
    ctx.__dict__.setdefault("tree_scaler_folds", {})[x] = (src, steps)
    return src, fold(ensemble, steps)


def _binary_expand(trees, base, post: str):
    """The two-column scores of a one-margin binary classifier (see the module docstring)."""
    b = 0.0 if base is None or len(base) == 0 else float(base[0])
    for _, _, leaves in trees:
        for key, weights in leaves.items():
            s = sum(weights.values())
            leaves[key] = {0: -s, 1: s}
    return trees, ([1.0 - b, b] if post == "NONE" else [-b, b])


def tree_classifier(ctx, node, attrs):
    labels = attrs.get("classlabels_int64s") or attrs.get("classlabels_strings") or []
    post = attrs.get("post_transform", "NONE")
    base = _floats(attrs, "base_values")
    trees, class_ids = _classic_trees(node, attrs, "class")
    if len(labels) == 2 and len(class_ids) == 1:
        trees, base = _binary_expand(trees, base, post)
    elif len(labels) < 2:
        raise UnsupportedOp(f"{where(node)}: {len(labels)} class labels; a classifier needs at least 2")
    elif base is not None and len(base) == 1 and len(labels) > 1:
        base = np.repeat(base, len(labels))
    if node.output[0]:
        ctx.drop(node.output[0], "the tree classifier's label output is not imported (MRT keeps the scores; "
                 "take their argmax)", optional_output=True)
    ensemble = build(trees, len(labels), base)
    _emit(ctx, node, ensemble, post, node.output[1])


def tree_regressor(ctx, node, attrs):
    n_targets = int(attrs.get("n_targets", 1))
    aggregate = attrs.get("aggregate_function", "SUM")
    trees, _ = _classic_trees(node, attrs, "target")
    ensemble = build(trees, n_targets, _floats(attrs, "base_values"), _aggregate_scale(node, aggregate, len(trees)))
    _emit(ctx, node, ensemble, attrs.get("post_transform", "NONE"), node.output[0])


def _aggregate_scale(node, aggregate: str, trees: int) -> float:
    if aggregate not in ("SUM", "AVERAGE"):
        raise UnsupportedOp(f"{where(node)}: aggregate_function {aggregate} is not supported (SUM, AVERAGE)")
    return 1.0 / trees if aggregate == "AVERAGE" else 1.0


def tree_ensemble(ctx, node, attrs):
    """TreeEnsemble (ml opset 5): splits and leaves in separate arrays; a child is a leaf index when its
    nodes_*leafs flag is set, else a split index."""
    attrs.ignore("nodes_hitrates", "nodes_missing_value_tracks_true")
    if attrs.get("membership_values") is not None:
        raise UnsupportedOp(f"{where(node)}: set-membership splits are not supported")
    get = lambda name: numpy_helper.to_array(attrs.get(name)) if attrs.get(name) is not None else None  # noqa: E731
    modes = get("nodes_modes")
    splits_v = get("nodes_splits").astype(np.float64)
    features = attrs.get("nodes_featureids") or []
    t_ids, t_leaf = attrs.get("nodes_truenodeids") or [], attrs.get("nodes_trueleafs") or []
    f_ids, f_leaf = attrs.get("nodes_falsenodeids") or [], attrs.get("nodes_falseleafs") or []
    targets, weights = attrs.get("leaf_targetids") or [], get("leaf_weights")
    roots = attrs.get("tree_roots") or []
    n = len(features)
    if not n or any(len(a) != n for a in (modes, splits_v, t_ids, t_leaf, f_ids, f_leaf)) or \
            weights is None or len(targets) != len(weights):
        raise UnsupportedOp(f"{where(node)}: the nodes_* and leaf_* attributes must be of one length each")
    splits = {("n", i): Split(int(features[i]), float(splits_v[i]), MODES_V5.get(int(modes[i]), str(modes[i])),
                              ("l" if t_leaf[i] else "n", int(t_ids[i])), ("l" if f_leaf[i] else "n", int(f_ids[i])))
              for i in range(n)}
    leaves = {("l", i): {int(targets[i]): float(weights[i])} for i in range(len(weights))}
    trees = []
    for r in roots:
        root = ("n", int(r))
        reach, stack = set(), [root]
        while stack:
            k = stack.pop()
            if k in reach or k[0] == "l":
                reach.add(k)
                continue
            reach.add(k)
            stack += [splits[k].true_child, splits[k].false_child]
        trees.append((root, {k: splits[k] for k in reach if k[0] == "n"}, {k: leaves[k] for k in reach if k[0] == "l"}))
    aggregate = AGGREGATE_V5.get(int(attrs.get("aggregate_function", 1)), "?")
    post = POST_V5.get(int(attrs.get("post_transform", 0)), "?")
    ensemble = build(trees, int(attrs.get("n_targets")), None, _aggregate_scale(node, aggregate, len(trees)))
    _emit(ctx, node, ensemble, post, node.output[0])


HANDLERS = {
    "TreeEnsembleClassifier": (tree_classifier, {1, 3, 5}),
    "TreeEnsembleRegressor": (tree_regressor, {1, 3, 5}),
    "TreeEnsemble": (tree_ensemble, {5}),
}
