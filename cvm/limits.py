"""Hard limits on untrusted models, checked before any allocation (docs/spec.md, "Limits").

The limits on a model's size are per opset (`LIMITS`): a shipped opset's limits never change (they
decide which models it accepts), and a newer opset may admit larger models. A graph built without
an explicit opset is written in the oldest opset that holds its ops and whose limits admit its
`Footprint` (cvm.ops.lowest_opset). The other limits hold in every opset.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from math import prod
from types import MappingProxyType

from .arith import INT32_MAX, INT32_MIN


@dataclass(frozen=True)
class Limits:
    """The size limits of one opset."""

    file_bytes: int  # a .cvm file
    nodes: int  # nodes of a graph
    tensor_elements: int  # one input or node output, per sample
    constant_elements: int  # one constant
    total_constant_elements: int  # all constants together
    activation_bytes: int  # per sample, all node outputs at their storage size
    run_bytes: int  # batch x activation bytes of one run, checked before a run allocates
    node_inputs: int | None = None  # inputs one node may list (None: any number, opsets 1-3)


LIMITS = MappingProxyType({
    1: Limits(file_bytes=1 << 28, nodes=4096, tensor_elements=1 << 24, constant_elements=1 << 24,
              total_constant_elements=1 << 26, activation_bytes=1 << 28, run_bytes=1 << 31),
    # Opset 2 admits VGG-16 (138M weights, fc6 alone 102,760,448), ViT-B/16 (87M) and detectors at
    # 1024x1024 (a ResNet-50 backbone there: 2.4 GB of activations per sample, tensors of 2^24).
    2: Limits(file_bytes=1 << 30, nodes=1 << 14, tensor_elements=1 << 26, constant_elements=1 << 27,
              total_constant_elements=1 << 28, activation_bytes=1 << 32, run_bytes=1 << 32),
})
LIMITS = MappingProxyType({**LIMITS, 3: LIMITS[2]})  # opset 3 reprices opset 2 (gas schedule v2), same limits
# Opset 4 (gas schedule v3) bounds the inputs a node lists: in opsets 1-3 one concat may list 10^6 inputs
# (a 2 MB file), whose verification and planning no gas paid. 1,024 is 20 times the widest concat of a
# real model we convert (DenseNet-201's 49) and keeps a node's edges, each paid by EDGE gas, a small part
# of what its verification costs (docs/spec.md, "Gas schedule v3").
MAX_NODE_INPUTS = 1024
LIMITS = MappingProxyType({**LIMITS, 4: replace(LIMITS[2], node_inputs=MAX_NODE_INPUTS)})
NEWEST = LIMITS[2]  # the largest limits (3 and 4 reprice opset 2; 4 also bounds node inputs): what a reader must be
# ready for before it knows the opset
MAX_FILE_BYTES = NEWEST.file_bytes  # checked before a file's opset is known; its opset's own limit after


def of(opset: int) -> Limits:
    """The limits of an opset; an unknown opset gets the newest ones (the verifier refuses it by name)."""
    return LIMITS.get(opset, NEWEST)


@dataclass(frozen=True)
class Footprint:
    """How large a graph is, in the terms of `Limits` (0: not known)."""

    nodes: int = 0
    largest_tensor: int = 0  # elements per sample, inputs and node outputs
    largest_constant: int = 0
    constant_elements: int = 0
    activation_bytes: int = 0

    def excess(self, limits: Limits) -> str | None:
        """The first figure over `limits`, as words; None when the limits admit the footprint."""
        checks = (("nodes", self.nodes, limits.nodes), ("elements per sample", self.largest_tensor, limits.tensor_elements),
                  ("elements in a constant", self.largest_constant, limits.constant_elements),
                  ("constant elements", self.constant_elements, limits.total_constant_elements),
                  ("activation bytes per sample", self.activation_bytes, limits.activation_bytes))
        return next((f"{have} {what} > {limit}" for what, have, limit in checks if have > limit), None)

    def __or__(self, other: "Footprint") -> "Footprint":
        """The larger of two footprints, figure by figure."""
        return Footprint(*(max(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)))


def static_footprint(inputs, constants: dict, nodes) -> Footprint:
    """What a graph's structure alone tells (activation sizes need the shape rules: the verifier's)."""
    sizes = [int(v.size) for v in constants.values()]
    largest_input = max((prod(i.shape) for i in inputs), default=0)
    return Footprint(len(nodes), largest_input, max(sizes, default=0), sum(sizes))


MAX_RANK = 6
MAX_DIM = 1 << 20
MAX_BATCH = 1 << 16
MAX_NAME_LENGTH = 128
MAX_LUT_SIZE = 1 << 16
MAX_SHIFT = 62
MAX_BITS = 32  # every tensor must fit int32

# Attribute bounds (docs/spec.md, "Attribute bounds"): every value an implementation must hold while
# evaluating an accepted model then fits int64 (index arithmetic) or int32 (values).
MAX_GEOMETRY = MAX_DIM  # any stride, dilation, pad, pooling-kernel extent or slice step
MIN_CLIP, MAX_CLIP = INT32_MIN, INT32_MAX  # clip bounds lie in the int32 range
MAX_AXIS = MAX_RANK - 1  # an axis attribute that is not checked against a rank (requant per tensor)
