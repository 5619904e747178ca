"""Per-layer quantization error: every float tensor that the integer model maps (meta.tensor_map)
compared, dequantized, with the float model's own value on the same inputs; and its plot. This is
the instrument for fidelity work: one bar per layer shows where the error enters and grows."""
from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import cvm
from cvm.interp import reference
from mrt.float_exec import run_float

WORST_NAMED = 5  # layers named, in the table `mrt eval` prints and on its plot
FIGURE_WIDTH_IN, DPI = 11.0, 110  # the plot's width, whatever the layer count (138 layers were once 4,015 px)
LEGEND_CHARS = 150  # a legend line's width in characters (monospace 7.5 pt across the figure)
SQNR_CAP = 99.0  # dB drawn for an exact layer (its SQNR is infinite)


@dataclass(frozen=True)
class LayerError:
    name: str  # the float tensor
    rel_l2: float  # ||dequantized - float|| / ||float||

    @property
    def sqnr_db(self) -> float:
        """Signal-to-quantization-noise ratio, 20 log10(1 / rel_l2) (inf for an exact layer)."""
        return math.inf if self.rel_l2 == 0 else -20.0 * math.log10(self.rel_l2)


def _dequantized(values: np.ndarray, scale, axis) -> np.ndarray:
    q, s = values.astype(np.float64), np.asarray(scale, np.float64)
    if s.size > 1:
        shape = [1] * q.ndim
        shape[axis + 1] = -1  # the batch axis comes first at run time
        s = s.reshape(shape)
    return q * s


def layer_errors(model: cvm.Model, x: np.ndarray | dict, graph) -> list[LayerError]:
    """The error of every mapped tensor of `graph` (the float IR after the passes), in graph order."""
    tmap = model.meta.get("tensor_map", {})
    xs = x if isinstance(x, dict) else {graph.inputs[0].name: x}  # several inputs: {float input name: array}
    _, fvals = run_float(graph, xs, capture=True)
    ints = {spec.name: model.quantize_input(xs[f.name], spec.name) for f, spec in zip(graph.inputs, model.inputs)}
    ivals = reference.run(model.graph, model.analysis, ints, keep_all=True)
    order = [n.outputs[0] for n in graph.nodes]
    out = []
    for fname in sorted(tmap, key=lambda n: order.index(n) if n in order else -1):
        iname, scale, axis = tmap[fname]
        if fname not in fvals or iname not in ivals or fvals[fname].shape != ivals[iname].shape:
            continue
        f = fvals[fname].astype(np.float64)
        err = np.linalg.norm(_dequantized(ivals[iname], scale, axis) - f) / max(np.linalg.norm(f), 1e-12)
        out.append(LayerError(fname, float(err)))
    return out


def worst(layers: list[LayerError], n: int = WORST_NAMED) -> list[LayerError]:
    return sorted(layers, key=lambda e: -e.rel_l2)[:n]


def legend_lines(layers: list[LayerError], n: int = WORST_NAMED) -> list[str]:
    """What the plot writes under its bars: the n worst layers by rank, each named in full (wrapped, never cut:
    the module path that tells layers apart sits at the start, the op name at the end), then the rest in one line."""
    order = {e.name: i for i, e in enumerate(layers)}
    bad = worst(layers, n)
    lines = []
    for rank, e in enumerate(bad, 1):
        head = f"{rank}. {e.sqnr_db:5.1f} dB  layer {order[e.name] + 1:>{len(str(len(layers)))}}/{len(layers)}  "
        lines += textwrap.wrap(head + e.name, LEGEND_CHARS, subsequent_indent=" " * len(head),
                               break_long_words=True, break_on_hyphens=False) or [head]
    rest = [min(e.sqnr_db, SQNR_CAP) for e in layers if e not in bad]
    if rest:
        lines.append(f"the other {len(rest)} layers: SQNR median {np.median(rest):.1f} dB, "
                     f"range {min(rest):.1f}..{max(rest):.1f} dB")
    return lines


def plot(layers: list[LayerError], path: str | Path, title: str = "") -> Path:
    """A PNG of fixed size at any layer count: one bar per layer (SQNR in dB, graph order; lower is worse), the
    WORST_NAMED worst in red with their rank, named in full below (legend_lines), the rest summarised."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    finite = [min(e.sqnr_db, SQNR_CAP) for e in layers]
    ranks = {e.name: r for r, e in enumerate(worst(layers), 1)}
    lines = legend_lines(layers)
    legend_in = 0.15 + 0.15 * len(lines)  # inches of text under the axes
    height = 3.6 + legend_in
    fig = plt.figure(figsize=(FIGURE_WIDTH_IN, height))
    ax = fig.add_axes((0.07, (legend_in + 0.6) / height, 0.9, 2.55 / height))
    ax.bar(range(1, len(layers) + 1), finite, width=0.8, color=["tab:red" if e.name in ranks else "tab:blue" for e in layers])
    for i, e in enumerate(layers):
        if e.name in ranks:
            ax.annotate(str(ranks[e.name]), (i + 1, finite[i]), ha="center", va="bottom", fontsize=8, color="tab:red")
    ax.set_xlim(0, len(layers) + 1)
    ax.set_xlabel(f"layer (graph order, 1..{len(layers)}; the worst {len(ranks)} numbered by rank)")
    ax.set_ylabel("SQNR vs float (dB)")
    ax.set_title(title or "per-layer quantization error")
    fig.text(0.02, 0.02, "\n".join(lines), family="monospace", fontsize=7.5, va="bottom")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path
