"""Decision agreement between a float model's scores and the integer model's, with near-ties counted
apart: a sample whose two best float scores lie within `tol` of each other (the integer model's proven
resolution) may be decided either way by any computation at that resolution, float32 ones included."""
from __future__ import annotations

import numpy as np


def decisions(scores: np.ndarray) -> np.ndarray:
    """argmax per row, the first index on ties (onnxruntime's and numpy's rule)."""
    return np.asarray(scores).argmax(axis=1)


def margins(scores: np.ndarray) -> np.ndarray:
    """Best minus second-best score per row."""
    top2 = np.sort(np.asarray(scores, np.float64), axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def compare(float_scores, int_scores, tol: float) -> dict:
    """{samples, agree, near_ties, disagree_near_tie, disagree}: `disagree` counts only samples that are
    not near-ties (the figure that must be 0)."""
    near = margins(float_scores) <= tol
    differ = decisions(float_scores) != decisions(int_scores)
    return {"samples": int(len(near)), "agree": int((~differ).sum()), "near_ties": int(near.sum()),
            "disagree_near_tie": int((differ & near).sum()), "disagree": int((differ & ~near).sum())}
