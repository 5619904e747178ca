"""The normalized tree ensemble every importer produces and every later stage reads.

Each split sends a sample LEFT when `x[feature] <= threshold` (strict = 0) or `x[feature] < threshold`
(strict = 1); GTE / GT splits are the same tests with their children swapped, so two comparison kinds
cover the four ONNX modes exactly (equality and set-membership splits are refused: they are not one
comparison). Trees are padded to the largest tree (`n_nodes` internal nodes, `n_leaves` leaves); a child
is an internal node index (>= 0) or a leaf `-(leaf + 1)`. Leaf values are per target and already scaled
(an AVERAGE aggregate is folded in as 1 / trees), so a sample's output is `base + sum over trees of the
value of the leaf it reaches`. This is what onnxruntime computes, in float32, from the same ONNX node.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mrt.errors import UnsupportedOp

LEAF = "LEAF"
# ONNX mode -> (strict comparison, children swapped): the true branch of GTE is the false branch of LT
MODES = {"BRANCH_LEQ": (0, False), "BRANCH_LT": (1, False), "BRANCH_GTE": (1, True), "BRANCH_GT": (0, True)}


@dataclass(frozen=True)
class Split:
    """One internal node as the importer reads it: `true_child` is taken when the mode's test holds."""
    feature: int
    threshold: float
    mode: str
    true_child: object   # a key of the tree's nodes
    false_child: object


@dataclass(frozen=True)
class Ensemble:
    feature: np.ndarray    # int64 [T, N]; -1 on padding
    threshold: np.ndarray  # float32 [T, N]
    strict: np.ndarray     # int64 [T, N]: 1 for x < t, 0 for x <= t
    left: np.ndarray       # int64 [T, N]: child taken when the test holds
    right: np.ndarray      # int64 [T, N]
    leaves: np.ndarray     # float32 [T, L, C]
    base: np.ndarray       # float32 [C]

    @property
    def trees(self) -> int:
        return self.feature.shape[0]

    @property
    def targets(self) -> int:
        return self.base.shape[0]

    def constants(self) -> tuple[np.ndarray, ...]:
        """The arrays in the order the float op `tree_ensemble` takes them after its input."""
        return (self.feature, self.threshold, self.strict, self.left, self.right, self.leaves, self.base)

    def depth(self) -> int:
        """The longest root-to-leaf path (number of splits)."""
        best = 0
        for t in range(self.trees):
            stack = [(0, 0)] if self.feature[t, 0] >= 0 else []
            while stack:
                n, d = stack.pop()
                for c in (self.left[t, n], self.right[t, n]):
                    if c >= 0:
                        stack.append((c, d + 1))
                    else:
                        best = max(best, d + 1)
        return best


def build(trees: list[tuple[object, dict, dict]], n_targets: int, base, scale: float = 1.0) -> Ensemble:
    """An Ensemble from per-tree (root key, {key: Split}, {key: {target: weight}}) as read from ONNX.
    Keys are any hashable node ids; a key in neither map is an error. `scale` multiplies every leaf
    (1 / trees for an AVERAGE aggregate)."""
    laid = [_lay_out(i, root, splits, leaves) for i, (root, splits, leaves) in enumerate(trees)]
    n = max(1, max(len(s) for s, _ in laid))
    n_leaves = max(len(v) for _, v in laid)
    shape = (len(laid), n)
    feature, left, right = np.full(shape, -1, np.int64), np.full(shape, -1, np.int64), np.full(shape, -1, np.int64)
    threshold, strict = np.zeros(shape, np.float32), np.zeros(shape, np.int64)
    values = np.zeros((len(laid), n_leaves, n_targets), np.float64)
    for t, (splits, leaves) in enumerate(laid):
        for k, (f, thr, st, lc, rc) in enumerate(splits):
            feature[t, k], threshold[t, k], strict[t, k], left[t, k], right[t, k] = f, thr, st, lc, rc
        for k, weights in enumerate(leaves):
            for target, w in weights.items():
                if not 0 <= target < n_targets:
                    raise UnsupportedOp(f"tree {t}: leaf weight for target {target} of {n_targets}")
                values[t, k, target] += w
    base = np.zeros(n_targets) if base is None or len(base) == 0 else np.asarray(base, np.float64)
    if base.shape != (n_targets,):
        raise UnsupportedOp(f"{base.size} base values for {n_targets} targets")
    return Ensemble(feature, threshold, strict, left, right, (values * scale).astype(np.float32),
                    base.astype(np.float32))


def _lay_out(t: int, root, splits: dict, leaves: dict):
    """Number one tree's internal nodes breadth first from the root and its leaves in the order reached."""
    rows, leaf_rows, order = [], [], {}
    if root in leaves:
        return [], [leaves[root]]
    queue = [root]
    order[root] = 0
    while queue:
        key = queue.pop(0)
        s = splits[key]
        if s.mode not in MODES:
            raise UnsupportedOp(f"tree {t} node {key}: split mode {s.mode} is not supported (only "
                                f"{', '.join(MODES)}: each split must be one comparison)")
        st, swap = MODES[s.mode]
        kids = []
        for child in ((s.false_child, s.true_child) if swap else (s.true_child, s.false_child)):
            if child in splits:
                if child in order:
                    raise UnsupportedOp(f"tree {t}: node {child} is reached twice (not a tree)")
                order[child] = len(order)
                queue.append(child)
                kids.append(order[child])
            elif child in leaves:
                leaf_rows.append(leaves[child])
                kids.append(-len(leaf_rows))
            else:
                raise UnsupportedOp(f"tree {t}: node {key} points to {child}, which is neither a split nor a leaf")
        if not np.isfinite(s.threshold):
            raise UnsupportedOp(f"tree {t} node {key}: threshold {s.threshold} is not finite")
        rows.append((int(s.feature), np.float32(s.threshold), st, *kids))
    return rows, leaf_rows


def leaf_index(x: np.ndarray, feature, threshold, strict, left, right) -> np.ndarray:
    """[B, T] index of the leaf each sample reaches in each tree, comparing float32 x with float32
    thresholds as onnxruntime does."""
    x = np.asarray(x, np.float32)
    b, t = x.shape[0], feature.shape[0]
    node = np.zeros((b, t), np.int64)
    if (feature[:, 0] < 0).all():   # every tree is a single leaf
        return node
    node = np.where(feature[None, :, 0] >= 0, node, -1)
    rows = np.arange(t)[None, :].repeat(b, axis=0)
    for _ in range(feature.shape[1] + 1):
        live = node >= 0
        if not live.any():
            break
        n = np.where(live, node, 0)
        f = feature[rows, n]
        v = x[np.arange(b)[:, None], np.maximum(f, 0)]
        thr = threshold[rows, n]
        go = np.where(strict[rows, n] == 1, v < thr, v <= thr)
        node = np.where(live, np.where(go, left[rows, n], right[rows, n]), node)
    return -node - 1


def run(x, feature, threshold, strict, left, right, leaves, base) -> np.ndarray:
    """[B, C] = base + the sum over trees of the reached leaves' values (float64 sum, float32 result)."""
    idx = leaf_index(x, feature, threshold, strict, left, right)
    picked = leaves.astype(np.float64)[np.arange(leaves.shape[0])[None, :], idx]  # [B, T, C]
    return (picked.sum(axis=1) + base.astype(np.float64)).astype(np.float32)
