"""Gas schedule v2 (opset 3): every op priced by its measured run time (docs/spec.md, "Gas schedule v2").

Schedule v1 charges one gas per multiply-accumulate whatever an op costs in time (a requantization
weighs three, a 3x3 conv's MAC one, while the first takes a fiftieth of the second's time per unit).
Schedule v2 keeps each op's v1 formula as its measure of work ("units": the v1 cost without the
per-node charge, cvm.gas) and scales it by the op's time per unit, the way Ethereum reprices
precompiles from measured time (EIP-2565, EIP-7904: gas = anchor rate x worst-case runtime):

    node gas = NODE + OP_NODE[op] + ceil(units * FACTOR[op] / FACTOR_SCALE)
    call gas = CALL + model gas x batch + ceil(io bytes * IO_NUM / IO_DEN)

The numbers below are normative: they were derived once by scripts/perf/gas_calibration.py (the
evidence: its method, the reference machine and the measured ratios are in docs/performance.md,
"Gas schedule v2") and are never recomputed at run time, so every node agrees on every model's gas.
A change to any of them is a new opset.
"""
from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Mapping

from .gas import SCHEDULE_V1, Schedule

ANCHOR_GAS_PER_SECOND = 60_000_000  # EIP-7904's anchor rate (https://eips.ethereum.org/EIPS/eip-7904)
FACTOR_SCALE = 10_000  # FACTOR is gas per FACTOR_SCALE units

NODE = 62  # per node: the dearest chain of nodes of a few elements each (cvm.tools.adversarial: dense_tiny_chain)
CALL = 175  # per call: a one-node model's call (checking the input, taking buffers, copying the output)
IO_NUM, IO_DEN = 1, 16  # per input and output byte a call moves: one gas per 16 bytes, rounded up (0.055 measured)

# gas per FACTOR_SCALE v1 units, op by op (and DEPTHWISE: a depthwise conv2d's row): the largest any
# calibration probe of that row needed (the probe that set each: docs/performance.md, "Gas schedule v2")
DEPTHWISE = "depthwise_conv2d"
FACTOR: Mapping[str, int] = MappingProxyType({
    "conv2d": 53, DEPTHWISE: 128, "conv_transpose2d": 84, "dense": 418, "matmul": 37,
    "max_pool2d": 158, "sum": 514, "max": 580,
    "add": 198, "sub": 85, "mul": 94, "div": 508, "relu": 47, "clip": 47, "requant": 21, "lut": 93,
    "isqrt": 27, "gather": 11, "resize2d": 224,
    "concat": 241, "pad": 106, "slice": 55, "transpose": 251, "reshape": 17, "flatten": 17,
})
# a row's own fixed part per node, beyond NODE (a depthwise conv's setup: depthwise_far, 9 outputs of 256 channels)
OP_NODE: Mapping[str, int] = MappingProxyType({DEPTHWISE: 33, "matmul": 1})

# conv2d and conv_transpose2d also pay per "lane" (a group; a depthwise conv2d, one input and one output
# channel per group, is one lane: its kernel runs all channels at once) and output pixel, and per lane and
# block of BLOCK_PIXELS output pixels: the portable kernels' fixed work per group and pixel, which a
# thin conv (two output channels on a large image) or one of thousands of groups on a 1x1 map does for
# a handful of multiply-accumulates. In gas per FACTOR_SCALE.
BLOCK_PIXELS = 64
LANE_PIXEL: Mapping[str, int] = MappingProxyType({"conv2d": 46386, DEPTHWISE: 42501, "conv_transpose2d": 68443})
LANE_BLOCK: Mapping[str, int] = MappingProxyType({"conv2d": 102408, DEPTHWISE: 0, "conv_transpose2d": 0})

SCHEDULE_V2 = Schedule("v2", NODE, CALL, IO_NUM, IO_DEN)
LANE_OPS = ("conv2d", "conv_transpose2d")


def priced(name: str, units: int) -> int:
    """The v2 op cost of `units` v1 units of op `name`: OP_NODE + ceil(units * FACTOR / FACTOR_SCALE). An
    op without a FACTOR row (added to opset 2 after these were measured) is priced at the dearest rows,
    never below what it may cost."""
    factor = FACTOR.get(name, max(FACTOR.values()))
    fixed = OP_NODE.get(name, 0 if name in FACTOR else max(OP_NODE.values()))
    return fixed + -(-units * factor // FACTOR_SCALE)


def op_cost(name: str, v1_cost):
    """The v2 cost rule of op `name` from its v1 rule (OpDef.cost)."""
    def cost(args, attrs, out) -> int:
        return priced(name, v1_cost(args, attrs, out))
    cost.__doc__ = f"schedule v2 cost of {name}: priced({name!r}, v1 units)"
    return cost


def is_depthwise(name: str, x_shape, out_shape, attrs: dict) -> bool:
    """A conv2d with one input and one output channel per group (C = groups = O): priced by its own
    row (DEPTHWISE) and as one lane, as the portable kernels run it (all channels at once)."""
    return name == "conv2d" and x_shape[0] == attrs["groups"] == out_shape[0]


def price_row(name: str, x_shape, out_shape, attrs: dict) -> str:
    """The FACTOR / OP_NODE row of a node: its op's, or DEPTHWISE for a depthwise conv2d."""
    return DEPTHWISE if is_depthwise(name, x_shape, out_shape, attrs) else name


def lane_counts(name: str, x_shape, out_shape, attrs: dict) -> tuple[int, int]:
    """(lanes x output pixels, lanes x blocks of BLOCK_PIXELS output pixels) of a conv2d /
    conv_transpose2d node per sample; (0, 0) for other ops."""
    if name not in LANE_OPS:
        return 0, 0
    lanes = 1 if is_depthwise(name, x_shape, out_shape, attrs) else attrs["groups"]
    pixels = out_shape[1] * out_shape[2]
    return lanes * pixels, lanes * -(-pixels // BLOCK_PIXELS)


def lane_gas(name: str, x_shape, out_shape, attrs: dict) -> int:
    """The per-lane part of a conv2d / conv_transpose2d node (0 for other ops):
    ceil((lane pixels * LANE_PIXEL[row] + lane blocks * LANE_BLOCK[row]) / FACTOR_SCALE) (lane_counts,
    price_row)."""
    pixels, blocks = lane_counts(name, x_shape, out_shape, attrs)
    if not pixels:
        return 0
    row = price_row(name, x_shape, out_shape, attrs)
    return -(-(pixels * LANE_PIXEL[row] + blocks * LANE_BLOCK[row]) // FACTOR_SCALE)


def _with_lanes(name: str, v1_cost):
    def cost(args, attrs, out) -> int:
        x = args[0].shape
        return priced(price_row(name, x, out, attrs), v1_cost(args, attrs, out)) + lane_gas(name, x, out, attrs)
    cost.__doc__ = f"schedule v2 cost of {name}: priced(its row, v1 units) + lane_gas"
    return cost


def reprice(table: Mapping) -> dict:
    """{name: OpDef} of `table` with every op's cost replaced by its v2 rule; nothing else changes."""
    return {name: dataclasses.replace(op, cost=(_with_lanes if name in LANE_OPS else op_cost)(name, op.cost))
            for name, op in table.items()}


def model_gas(model) -> int:
    """The model's gas per sample under schedule v2 (what `cvm.repricing.repriced(model).gas` is), from its v1 node
    costs without verifying it again: a v1 node cost is SCHEDULE_V1.node + the op's v1 units."""
    if model.schedule is SCHEDULE_V2:
        return model.gas
    a, total = model.analysis, 0
    for node, cost, attrs in zip(model.graph.nodes, a.node_costs, a.attrs):
        x, out = a.tensors[node.inputs[0]].shape, a.tensors[node.output].shape
        total += (NODE + priced(price_row(node.op, x, out, attrs), cost - SCHEDULE_V1.node)
                  + lane_gas(node.op, x, out, attrs))
    return total


def seconds_at_anchor(gas: int) -> float:
    """What `gas` buys on the reference path at the anchor rate."""
    return gas / ANCHOR_GAS_PER_SECOND


assert all(isinstance(v, int) and v >= 0 for v in FACTOR.values()) and math.gcd(IO_NUM, IO_DEN) == 1
