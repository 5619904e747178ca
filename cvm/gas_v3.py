"""Gas schedule v3 (opset 4): schedule v2 plus what v2 left unpaid (docs/spec.md, "Gas schedule v3").

Schedule v2 priced each op by its time on tensors that fit in cache and counted nothing a node does per
listed input or a model does once when it is loaded. An attacker's review found three gaps:

- **Memory-bound work.** A gather, transpose, slice, concat, pad or resize over a tensor far larger than
  cache pays a cache miss per element (16 chained gathers over a 2^20-row table ran 720 times below the
  median model's gas per second). v3 prices a data-movement node whose largest operand exceeds
  LARGE_ELEMENTS per sample at its worst measured time per unit on such tensors (LARGE), and at v2's
  FACTOR otherwise (an operand of at most LARGE_ELEMENTS elements, 256 KiB at int32, stays in any
  CPU's L2 while the node runs).
- **Edges.** A node pays EDGE per input it lists: verification and planning do a little work per listed
  input, which opsets 1-3 did not charge (one concat of 10^6 inputs: seconds of verification for 24 kgas).
  Opset 4 also bounds the inputs of a node (cvm.limits.MAX_NODE_INPUTS).
- **Loading.** A call of a model that is not in the operator's store pays for decoding, hashing and
  verifying its constants: LOAD_NUM / LOAD_DEN gas per constant byte, once per call (a model of 64 MiB
  of constants and one tiny node cost 200 gas a call and 0.36 s to load).

    node gas = v2 node gas (FACTOR, or LARGE for a large data-movement node) + EDGE x inputs listed
    call gas = CALL + ceil(constant bytes x LOAD_NUM / LOAD_DEN) + B x model gas + ceil(B x io bytes x IO_NUM / IO_DEN)

The numbers are normative (scripts/perf/gas_memory.py is the evidence: docs/performance.md, "Gas schedule
v3"); a change to any of them is a new opset.
"""
from __future__ import annotations

import dataclasses
import math
from types import MappingProxyType
from typing import Mapping

from . import gas_v2
from .gas import Schedule

MEMORY_MARGIN = 2  # LARGE rows and CALL are priced at twice their measured worst (below)
CALL = 400  # per call: MEMORY_MARGIN x one Model.run of a one-node model (3.3 us thread time, 7.5 us wall beside
# other jobs; v2's CALL, 175, timed the prepared runner alone): allocation- and scheduler-bound, like memory
EDGE = 99  # per input a node lists: decoding, verifying and planning one distinct listing (1.65 us, reference machine)
LOAD_NUM, LOAD_DEN = 1, 5  # per constant byte, once per call: decoding, keccak, verifying, planning (~2.8 ns a byte)
LARGE_ELEMENTS = 1 << 16  # a data-movement node's largest operand per sample above this is priced LARGE

# gas per gas_v2.FACTOR_SCALE v1 units of a large data-movement node: MEMORY_MARGIN times the worst any probe
# of 64 MiB tensors with the row's worst access pattern needed (scripts/perf/gas_memory.py). The margin: a
# memory-bound node's time depends on DRAM latency and on what else the machine runs far more than a compute
# node's (the 64 MiB transpose took twice its calibrated time in a wall-clock run beside other jobs), and
# the schedule must hold on the slowest node that serves the model, not on the calibration's quiet core.
LARGE: Mapping[str, int] = MappingProxyType({
    "gather": 2570, "transpose": 9640, "slice": 12480, "concat": 600, "pad": 211, "resize2d": 336,
    "reshape": 127, "flatten": 124,
})

SCHEDULE_V3 = Schedule("v3", gas_v2.NODE, CALL, gas_v2.IO_NUM, gas_v2.IO_DEN, edge=EDGE,
                       load_num=LOAD_NUM, load_den=LOAD_DEN)


def largest_operand(args, out) -> int:
    """Elements per sample of a node's largest input, table or output."""
    return max([math.prod(map(int, out))] + [math.prod(map(int, a.shape)) for a in args])


def is_large(name: str, args, out) -> bool:
    """A data-movement node (a LARGE row) whose largest operand exceeds LARGE_ELEMENTS per sample."""
    return name in LARGE and largest_operand(args, out) > LARGE_ELEMENTS


def op_cost(name: str, v1_cost):
    """The v3 cost rule of op `name` from its v1 rule: v2's, with LARGE for a large data-movement node."""
    v2_cost = (gas_v2._with_lanes if name in gas_v2.LANE_OPS else gas_v2.op_cost)(name, v1_cost)

    def cost(args, attrs, out) -> int:
        if is_large(name, args, out):
            return -(-v1_cost(args, attrs, out) * LARGE[name] // gas_v2.FACTOR_SCALE)
        return v2_cost(args, attrs, out)
    cost.__doc__ = f"schedule v3 cost of {name}: v2's, or LARGE[{name!r}] per unit when large"
    return cost


def reprice(table: Mapping) -> dict:
    """{name: OpDef} of `table` with every op's cost replaced by its v3 rule; nothing else changes."""
    return {name: dataclasses.replace(op, cost=op_cost(name, op.cost)) for name, op in table.items()}


assert all(LARGE[row] >= gas_v2.FACTOR[row] for row in LARGE), "a large node is never cheaper than a small one"
