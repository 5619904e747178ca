"""Which tensors of a transformer encoder get wide (QuantConfig.wide_bits = 12) activations.

Measured on all-MiniLM-L6-v2 (64 calibration sentences, 256 held out; /tmp experiment scripts whose
committed form is scripts/models/minilm_eval.py): at 8 bits everywhere the per-layer report puts the error
at the GELU tables and at the FFN output dense, whose outputs carry BERT's few outlier channels into the
residual sum (mse calibration at 8 bits clips them). Cosine mean / same nearest neighbour:
  8 bits everywhere                                             0.9839 / 0.848
  GELU tables wide, thresholds still chosen for 8 bits          0.9890 / 0.875
  + LayerNorm outputs, thresholds still for 8 bits              0.9933 / 0.891
  the same, thresholds calibrated at 12 bits (calibrate(wide=)) 0.9978 / 0.945
  + the residual sums each LayerNorm reads                      0.9991 / 0.977
  + every dense output (Q, K, V)                                0.9993 / 0.980
  + 10-bit weights (QuantConfig.weight_bits; 128 calibration)   0.9997 / 0.992
Widening every tensor of the graph gave 0.776 until div_tensor requantized a numerator whose proven range
left it no bits (the L2 normalisation divides the mean pooling's raw quotient): now 0.9995 on 16 held-out
sentences, at the cost of every op running wide; the sets below are the measured useful ones. Gas does not price activation width
(12-bit values are stored in int16 as 8-bit ones are: 728.8M -> 730.1M per sentence, 13 more requants),
but the numba backend does: 22 -> 31 ms at batch 1, 310 -> 581 ms at batch 32, one thread (minilm_eval.py,
.cache/models/minilm_table.md)."""
from __future__ import annotations

from mrt.graph import Graph

# the sets, by name, that encoder_wide_tensors can combine
PARTS = ("activations", "layer_norm", "residual", "dense")
ALIASES = {"encoder": PARTS}  # `mrt convert --wide encoder`: the measured best set


def parse_parts(spec: str | tuple[str, ...]) -> tuple[str, ...]:
    """`--wide` as given ("encoder", "activations,layer_norm" or a tuple) -> a tuple of PARTS."""
    names = spec.split(",") if isinstance(spec, str) else spec
    parts = tuple(dict.fromkeys(p for n in names for p in ALIASES.get(n.strip(), (n.strip(),)) if p))
    unknown = sorted(set(parts) - set(PARTS))
    if unknown or not parts:
        raise ValueError(f"unknown wide-tensor parts {unknown or [spec]}; choose from {(*ALIASES, *PARTS)}")
    return parts


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
