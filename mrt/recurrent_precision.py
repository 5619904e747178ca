"""Recurrent cells are quantized wide by default on the cvm target.

An unrolled LSTM/GRU/RNN (mrt.onnx_import.ops_rnn) feeds each step's hidden and cell state into the next,
so a quantization error made at step t is read again at every later step: at 8-bit activations and
weights the sunspots LSTM forecast 14.21 MAE (float 13.96, onnxruntime int8 14.09) and the digits GRU
agreed with float on 98.9% of test sequences (onnxruntime int8 99.7%). The tensors of the recurrence
(Graph.recurrent) therefore get QuantConfig.wide_bits activations and the dense layers reading them
WEIGHT_BITS weights; the layers around the recurrence (a CNN front end, a classifier head) keep 8 bits
and their fast int8 kernels. Gas does not price activation width; the measured latency and fidelity are
in docs/fidelity.md ("Recurrent models"). `convert(..., recurrent=False)` / `mrt convert
--narrow-recurrent` quantizes them like every other tensor.
"""
from __future__ import annotations

from mrt.graph import Graph

WEIGHT_BITS = 10  # the recurrent dense layers' weights (12-bit activations x 10-bit weights: K < 2^9 per split)


LAYOUT_OPS = frozenset({"reshape", "flatten", "transpose", "slice", "concat", "identity", "dropout"})  # move values only


def wide_tensors(graph: Graph) -> tuple[str, ...]:
    """The float tensors of the graph's recurrences that survive the passes (names a pass removed drop out),
    grown through ops that only move values: the graph input a transpose hands to the cell, the last step's
    hidden state a slice hands to the classifier (whose dense layer then reads a wide tensor: wide weights)."""
    wide = {name for name in graph.recurrent if name in graph.shapes}
    grown = True
    while grown:
        grown = False
        for node in graph.nodes:
            if node.op not in LAYOUT_OPS:
                continue
            ins = [i for i in node.inputs if not graph.is_constant(i)]
            if node.outputs[0] in wide and not wide.issuperset(ins):
                wide.update(ins)  # what a cell's input sequence was moved from
                grown = True
            elif ins and wide.issuperset(ins) and node.outputs[0] not in wide:
                wide.add(node.outputs[0])  # what the cell's states are moved to
                grown = True
    return tuple(sorted(wide))


def overrides(graph: Graph, given: dict) -> dict:
    """Config overrides giving the recurrence wide activations and weights, unless the caller chose the wide
    tensors or the wide weight bits themselves."""
    tensors = wide_tensors(graph)
    if not tensors or "wide_tensors" in given:
        return {}
    return {"wide_tensors": tensors, "wide_weight_bits": given.get("wide_weight_bits", WEIGHT_BITS)}
