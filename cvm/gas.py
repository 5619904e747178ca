"""Every cost constant, named once. A node's cost is a formula of shapes alone (docs/spec.md, "Cost").
Schedule v1 (opsets 1 and 2) is below; schedule v2, priced by measured time (opset 3), is cvm.gas_v2."""
from __future__ import annotations

import numpy as np

GAS_PER_NODE = 100  # fixed overhead of dispatching any node
GAS_PER_MAC = 1  # one multiply-accumulate in conv2d / dense / matmul
GAS_PER_ELEMENT = 1  # one output element written (every op)
GAS_PER_COMPARE = 1  # one comparison in max_pool2d / max
GAS_PER_REQUANT = 3  # multiply, rounding shift, clip
GAS_PER_LOOKUP = 2  # table lookup
GAS_PER_DIVISION = 8  # integer division
GAS_PER_IO_BYTE = 3  # a call pays per byte of input and output it moves (the identity precompile's word charge / 32 * 3)
CALL_BASE_GAS = 3000  # a call's fixed cost, once per call whatever the model: checking the inputs, taking
# buffers, copying the outputs take ~7 us on numba (docs/performance.md, "Adversarial models"), ~2,800 gas at
# the fixture models' median gas/s; Ethereum prices its precompiles' fixed cost the same way (ecrecover: 3000)


class Schedule:
    """What a gas schedule charges beyond the ops' own cost formulas (OpDef.cost): per node and per input
    a node lists (`edge`), once per call, per constant byte once per call (`load_num / load_den`: loading a
    model that is not in the store), and per byte of input and output a call moves (ceil(bytes * io_num /
    io_den) over the whole call). cvm.ops.SCHEDULES names each opset's schedule; the verifier adds `node`
    and `edge` to every node's cost and cvm.gas.call_gas the rest."""

    __slots__ = ("name", "node", "call", "io_num", "io_den", "edge", "load_num", "load_den")

    def __init__(self, name: str, node: int, call: int, io_num: int, io_den: int = 1, *, edge: int = 0,
                 load_num: int = 0, load_den: int = 1):
        self.name, self.node, self.call, self.io_num, self.io_den = name, node, call, io_num, io_den
        self.edge, self.load_num, self.load_den = edge, load_num, load_den

    def io_gas(self, nbytes: int) -> int:
        return -(-nbytes * self.io_num // self.io_den)

    def load_gas(self, constant_bytes: int) -> int:
        return -(-constant_bytes * self.load_num // self.load_den)

    def __repr__(self) -> str:
        return (f"Schedule({self.name}: node {self.node}, edge {self.edge}, call {self.call}, io {self.io_num}/"
                f"{self.io_den} per byte, load {self.load_num}/{self.load_den} per constant byte)")


SCHEDULE_V1 = Schedule("v1", GAS_PER_NODE, CALL_BASE_GAS, GAS_PER_IO_BYTE)  # opsets 1 and 2


def sample_io_bytes(model) -> int:
    """Bytes of input and output of one sample (every input and output at its storage type)."""
    return sum(int(np.prod(s.shape[1:], dtype=np.int64)) * s.dtype.itemsize for s in model.inputs + model.outputs)


def call_gas(model, batch: int = 1) -> int:
    """What a call of `batch` samples through the chain pays under the schedule of the model's opset
    (docs/spec.md, "Cost"; docs/chain.md): the call's fixed charge, the model's gas per sample, and the
    input and output bytes, and (schedule v3) its constant bytes. This is Model.call_gas."""
    s = model.schedule
    return call_base_gas(model) + model.gas * batch + s.io_gas(sample_io_bytes(model) * batch)


def call_base_gas(model) -> int:
    """What any call of the model pays once, whatever it moves or runs: the schedule's call charge and,
    under schedule v3, loading its constants (cvm.gas_v3.LOAD_NUM / LOAD_DEN a byte). The CVM and trace
    precompiles both charge it (cvm.chain.precompile, cvm.chain.trace_precompile)."""
    s = model.schedule
    return s.call + s.load_gas(constant_bytes(model))


def constant_bytes(model) -> int:
    """Bytes of the model's constants at their stored dtypes (what loading it decodes, hashes and checks)."""
    return sum(int(v.nbytes) for v in model.graph.constants.values())
