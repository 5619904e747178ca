"""A spectrogram front end is quantized wide on the cvm target: every tensor from the graph input to an STFT
magnitude (mrt.passes.fuse_magnitude), the magnitude included, gets QuantConfig.wide_bits activations.

An audio model's waveform and its Fourier coefficients span the loud and the quiet frames of one stream in
one per-tensor scale: at 8 bits the quiet frames, the ones a voice-activity detector decides on, keep a few
levels. silero-vad (scripts/models/vad_measure.py's functions, 8 synthetic streams): decisions equal to
float's on 84.5% of chunks with an 8-bit front end, 92.2% with a 12-bit one, mean |p - float| 0.164 ->
0.067; widening its encoder instead gave 88.5%, its decoder 85.3% (docs/fidelity.md). The encoder and the
head keep their 8-bit kernels. Gas does not price activation width.
"""
from __future__ import annotations

from mrt.graph import Graph
from mrt.recurrent_precision import LAYOUT_OPS


def wide_tensors(graph: Graph) -> tuple[str, ...]:
    """Each magnitude node's output and every tensor it is computed from, back to the graph inputs (constants
    left out), and what ops that only move values hand the magnitude on to (the reshape into the first conv's
    input: that conv then reads the wide spectrum)."""
    magnitudes = [n.outputs[0] for n in graph.nodes if n.op == "magnitude"]
    wide: set[str] = set()
    todo = list(magnitudes)
    while todo:
        name = todo.pop()
        if name in wide or graph.is_constant(name):
            continue
        wide.add(name)
        node = graph.producer(name)
        if node is not None:
            todo.extend(node.inputs)
    todo = list(magnitudes)
    while todo:
        for node in graph.consumers(todo.pop()):
            if node.op in LAYOUT_OPS and node.outputs[0] not in wide:
                wide.add(node.outputs[0])
                todo.append(node.outputs[0])
    return tuple(sorted(wide))
