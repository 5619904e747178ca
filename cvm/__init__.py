"""CVM: a deterministic integer inference VM. The spec is docs/spec.md; the reference interpreter
(cvm.interp.reference) is its executable form.

    model = cvm.load("m.cvm")            # verified on load
    y = model.run(x_int)                  # backend="numba" | "reference" | "fhe"
    cvm.output_hash(y)                    # keccak256 commitment of the outputs

Hand-built models: `b = cvm.GraphBuilder(); x = b.input("x", (4,), bits=8);
w = b.const([[1, 2, 3, 4]]); y = b.op("dense", x, w); model = b.build(y)`.
"""
from .builder import GraphBuilder
from .commit import encode_outputs, output_hash
from .errors import CVMError, FormatError, GasLimitExceeded, InputError, LimitError, VerifyError
from .ir import Graph, Input, Node
from .model import Model, TensorSpec, load, loads

__all__ = [
    "CVMError", "FormatError", "GasLimitExceeded", "Graph", "GraphBuilder", "Input", "InputError", "LimitError",
    "Model", "Node", "TensorSpec", "VerifyError", "encode_outputs", "load", "loads", "output_hash",
]
