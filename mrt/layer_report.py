"""Per-layer quantization error: every float tensor that the integer model maps (meta.tensor_map)
compared, dequantized, with the float model's own value on the same inputs; and its plot. This is
the instrument for fidelity work: one bar per layer shows where the error enters and grows."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import cvm
from cvm.interp import reference
from mrt.float_exec import run_float

WORST_NAMED = 3  # layers named on the plot


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


def _short(name: str, width: int = 32) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3):]


def plot(layers: list[LayerError], path: str | Path, title: str = "") -> Path:
    """A PNG with one bar per layer (SQNR in dB, graph order; lower is worse), the worst named."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    finite = [min(e.sqnr_db, 99.0) for e in layers]
    bad = {e.name for e in worst(layers)}
    fig, ax = plt.subplots(figsize=(max(6.0, 0.25 * len(layers) + 2), 4))
    ax.bar(range(len(layers)), finite, color=["tab:red" if e.name in bad else "tab:blue" for e in layers])
    marks = [i for i, e in enumerate(layers) if e.name in bad]
    for i in marks:
        ax.annotate(f"{layers[i].sqnr_db:.1f}", (i, finite[i]), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(marks, [_short(layers[i].name) for i in marks], rotation=25, ha="right", fontsize=7)
    ax.set_xlabel("layer (graph order; the worst named)")
    ax.set_ylabel("SQNR vs float (dB)")
    ax.set_title(title or "per-layer quantization error")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
