"""The float op `tree_ensemble` (mrt.trees.ensemble): a [B, F] sample matrix and the ensemble's seven
constant arrays (feature, threshold, strict, left, right, leaves, base) -> [B, C] sums of reached leaves."""
from mrt.errors import GraphError
from mrt.float_ops.shapes import is_batched
from mrt.trees.ensemble import run


def tree_ensemble_shape(x, feature, threshold, strict, left, right, leaves, base):
    if not is_batched(x) or len(x) != 2:
        raise GraphError(f"tree_ensemble: the input must be [batch, features], got {x}")
    if not (tuple(feature) == tuple(threshold) == tuple(strict) == tuple(left) == tuple(right)) or len(feature) != 2:
        raise GraphError("tree_ensemble: feature, threshold, strict, left and right must be [trees, nodes] alike")
    if len(leaves) != 3 or leaves[0] != feature[0] or len(base) != 1 or base[0] != leaves[2]:
        raise GraphError(f"tree_ensemble: leaves {leaves} must be [trees, leaves, targets] and base [targets], "
                         f"got base {base}")
    return (x[0], base[0])


# name: (run, shape rule, attribute names, (min inputs, max inputs))
TREES = {"tree_ensemble": (run, tree_ensemble_shape, (), (8, 8))}
