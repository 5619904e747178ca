"""Float graph rewrite passes. Each is a pure function Graph -> Graph in its own module, named in
DEFAULT_PIPELINE, the ordered sequence the converter runs; run_pipeline runs any such sequence,
optionally dumping the graph after every stage for inspection and diffing (`dumper`, which the
converter's own stages use too)."""
import os
from pathlib import Path

from mrt.passes.conv1d_as_2d import conv1d_as_2d
from mrt.passes.fold_batchnorm import fold_batchnorm
from mrt.passes.fold_constants import fold_constants
from mrt.passes.fold_input_affine import fold_input_affine
from mrt.passes.fuse_layer_norm import fuse_layer_norm
from mrt.passes.fuse_log_sum_exp import fuse_log_sum_exp
from mrt.passes.fuse_magnitude import fuse_magnitude
from mrt.passes.fuse_masked_softmax import fuse_masked_softmax
from mrt.passes.fuse_univariate import fuse_univariate
from mrt.passes.keep_reduced_axes import keep_reduced_axes
from mrt.passes.matmul_as_dense import matmul_as_dense
from mrt.passes.pool1d_as_2d import pool1d_as_2d
from mrt.passes.remove_identity import remove_identity
from mrt.passes.remove_unit_ops import remove_unit_ops
from mrt.passes.rewrite_avg_pool import rewrite_avg_pool
from mrt.passes.rewrite_global_avg_pool import rewrite_global_avg_pool
from mrt.passes.strip_output_transform import strip_output_transform

# Identities go first so that nothing hides a batch_norm or a scale from its conv/dense;
# fold_constants runs before fold_batchnorm (conv -> mul -> bn) and after it (conv -> bn -> mul).
DEFAULT_PIPELINE = (
    ("remove_identity", remove_identity),
    ("remove_unit_ops", remove_unit_ops),
    ("fold_constants", fold_constants),
    ("fold_batchnorm", fold_batchnorm),
    ("fold_constants", fold_constants),
    ("matmul_as_dense", matmul_as_dense),
    ("conv1d_as_2d", conv1d_as_2d),
    ("pool1d_as_2d", pool1d_as_2d),
    ("keep_reduced_axes", keep_reduced_axes),
    ("fuse_magnitude", fuse_magnitude),
    ("rewrite_global_avg_pool", rewrite_global_avg_pool),
    ("rewrite_avg_pool", rewrite_avg_pool),
    ("fold_input_affine", fold_input_affine),
    ("fuse_log_sum_exp", fuse_log_sum_exp),
    ("fuse_univariate", fuse_univariate),
    ("fuse_masked_softmax", fuse_masked_softmax),
    ("fuse_layer_norm", fuse_layer_norm),
)


def dumper(dump):
    """The dump hook: (stage number, name, printable) -> None, from None, True (print), a directory
    (one NN_name.txt per stage) or a callable."""
    if dump is None or dump is False:
        return lambda stage, name, graph: None
    if dump is True:
        return lambda stage, name, graph: print(f"== {stage:02d} {name}\n{graph}\n")
    if isinstance(dump, (str, os.PathLike)):
        folder = Path(dump)
        folder.mkdir(parents=True, exist_ok=True)
        return lambda stage, name, graph: (folder / f"{stage:02d}_{name}.txt").write_text(
            f"{graph}\n")
    if callable(dump):
        return dump
    raise TypeError(f"dump must be None, True, a directory or a callable, not {dump!r}")


def run_pipeline(graph, passes=DEFAULT_PIPELINE, dump=None):
    """Run (name, fn) passes in order and return the final graph. dump: None; True to print
    each stage; a directory to write NN_name.txt per stage; or a callable(stage, name, graph).
    Stage 0 is the input graph ("input")."""
    emit = dumper(dump)
    emit(0, "input", graph)
    for stage, (name, fn) in enumerate(passes, start=1):
        graph = fn(graph)
        emit(stage, name, graph)
    return graph


__all__ = ["DEFAULT_PIPELINE", "run_pipeline", "dumper", "fold_batchnorm", "fold_constants", "fuse_univariate",
           "remove_identity", "rewrite_avg_pool", "rewrite_global_avg_pool", "strip_output_transform"]
