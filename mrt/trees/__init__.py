"""Tree ensembles (ai.onnx.ml TreeEnsemble*): one normalized form (`Ensemble`), its float semantics and
the input encoding by threshold position that makes every split an exact integer comparison."""
from mrt.trees.ensemble import Ensemble, Split

__all__ = ["Ensemble", "Split"]
