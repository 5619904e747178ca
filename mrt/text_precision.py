"""Which tensors of a transformer encoder get wide (QuantConfig.wide_bits = 12) activations.

Measured on all-MiniLM-L6-v2 (scripts/models/minilm_eval.py, 256 held-out sentences, per-layer report):
at 8 bits everywhere the error enters at the GELU tables and the FFN output dense, whose outputs carry
BERT's few outlier channels into the residual sum; at 8 bits mse calibration clips them. Widening, with
thresholds calibrated at 12 bits (mrt.calibrate's `wide`):
  GELU inputs/outputs                          cosine 0.9890 -> (thresholds at 8 bits) 0.9890
  + LayerNorm outputs (the Q/K/V and FFN inputs) 0.9978
  + the residual sums each LayerNorm reads      0.9991
Gas does not price activation width (12-bit values are stored in int16 as 8-bit ones are), and the
latency at batch 1 moved within the noise of the shared machine."""
from __future__ import annotations

from mrt.graph import Graph

# the sets, by name, that encoder_wide_tensors can combine
PARTS = ("activations", "layer_norm", "residual", "dense")


def encoder_wide_tensors(graph: Graph, parts: tuple[str, ...] = PARTS) -> tuple[str, ...]:
    """The float tensors to widen in a graph after DEFAULT_PIPELINE:
    activations: the input and output of every univariate table (GELU);
    layer_norm: every layer_norm output (what the attention and FFN dense layers read);
    residual: the operands and sum of every add that a layer_norm reads;
    dense: every dense output that is not a graph output (Q, K, V: the attention matmuls' operands)."""
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise ValueError(f"unknown wide-tensor parts {sorted(unknown)}; choose from {PARTS}")
    wide: set[str] = set()
    for node in graph.nodes:
        if "activations" in parts and node.op == "univariate":
            wide |= {node.inputs[0], node.outputs[0]}
        if "layer_norm" in parts and node.op == "layer_norm":
            wide.add(node.outputs[0])
        if "residual" in parts and node.op == "add" and \
                any(c.op == "layer_norm" for c in graph.consumers(node.outputs[0])):
            wide |= {node.outputs[0], *(i for i in node.inputs if not graph.is_constant(i))}
        if "dense" in parts and node.op == "dense" and node.outputs[0] not in graph.outputs:
            wide.add(node.outputs[0])
    return tuple(sorted(wide))
