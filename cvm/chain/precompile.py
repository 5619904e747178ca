"""The CVM precompile of the embedded chain.

Calldata is ``model hash (32 bytes) ++ input bytes`` (one or more samples of the model's single
input, little-endian in its storage type); the return data is the output bytes in the same wire
format (``Model.encode_output``). Gas, charged before anything runs, under the gas schedule of the
model's own opset (cvm.gas.call_gas; cvm.ops.SCHEDULES), so that a model keeps the price it was
registered at whatever opsets come later:

    call_base_gas(model) + model.gas * batch + schedule.io_gas((input bytes + output bytes) * batch)

Schedule v1 (opsets 1, 2): 3000 + gas * batch + 3 per byte. Schedule v2 (opset 3, priced by time,
cvm.gas_v2): CALL (175) + gas * batch + 1 per 16 bytes (rounded up), model.gas itself priced by v2.
Schedule v3 (opset 4, cvm.gas_v3): CALL 400, plus 1 gas per 5 constant bytes in the base (loading).

An unknown model, a malformed call, a wrong input length or too little gas raise a VMError: the
call fails, consumes all the gas given to it, and touches no state. So does any other failure
(a model file the store cannot load, a run that raises MemoryError or OverflowError, a bug): no
exception but that VMError ever leaves the precompile, whose message names only the kind of
failure, never the text of an unexpected exception (the same revert on every node).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from eth.abc import ComputationAPI
from eth.exceptions import VMError

import cvm
from cvm.gas import GAS_PER_IO_BYTE, call_gas
from cvm.chain.store import HASH_BYTES, BadModelFile, ModelStore, StoreError

log = logging.getLogger(__name__)

CVM_PRECOMPILE_ADDRESS = (0xC0DE).to_bytes(20, "big")  # ICVM.PRECOMPILE in contracts/src/ICVM.sol
GAS_PER_BYTE = GAS_PER_IO_BYTE  # schedule v1's charge per byte of input and of output (cvm.gas)


class CVMPrecompileError(VMError):
    """The CVM precompile rejected a call."""


def sample_bytes(spec) -> int:
    """Wire size of one sample of a TensorSpec (its shape has the batch dimension first)."""
    return int(np.prod(spec.shape[1:], dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def precompile_gas(model: cvm.Model, input_length: int) -> int:
    """The gas of a call with `input_length` input bytes, under the schedule of the model's opset."""
    return call_gas(model, input_length // sample_bytes(model.inputs[0]))


def make_cvm_precompile(store: ModelStore, backend: str = "numba") -> Callable[[ComputationAPI], ComputationAPI]:
    """The precompile function py-evm calls with the computation of a message to the address."""

    def run_call(computation: ComputationAPI, model_hash: bytes, payload: bytes) -> None:
        try:
            model = store.get(model_hash)
        except BadModelFile as e:  # the operator's store is damaged: worth their attention
            log.warning("CVM precompile: model %s cannot be loaded: %s", model_hash.hex(), e)
            raise CVMPrecompileError(f"model {model_hash.hex()} cannot be loaded") from None
        except StoreError:
            raise CVMPrecompileError(f"unknown model {model_hash.hex()}") from None
        if len(model.inputs) != 1 or len(model.outputs) != 1:
            raise CVMPrecompileError("the CVM precompile runs models with one input and one output")
        per_sample = sample_bytes(model.inputs[0])
        if not payload or len(payload) % per_sample:
            raise CVMPrecompileError(
                f"input of {len(payload)} bytes is not a whole number of {per_sample}-byte samples"
            )
        computation.consume_gas(precompile_gas(model, len(payload)), reason="CVM precompile")
        try:
            x = model.decode_input(payload)
            y = model.run(x, backend=backend)
            output = model.encode_output(y)
        except cvm.CVMError as e:
            raise CVMPrecompileError(f"CVM run failed: {e}") from None
        computation.output = output

    def cvm_precompile(computation: ComputationAPI) -> ComputationAPI:
        data = computation.msg.data_as_bytes
        if len(data) < HASH_BYTES:
            raise CVMPrecompileError(f"CVM call data has {len(data)} bytes, less than a model hash")
        model_hash, payload = bytes(data[:HASH_BYTES]), bytes(data[HASH_BYTES:])
        try:
            run_call(computation, model_hash, payload)
        except VMError:  # ours, or out of gas: the call fails and consumes its gas
            raise
        except Exception as e:  # MemoryError, OverflowError, RecursionError, a bug: the same clean failure
            log.warning("CVM precompile: model %s failed on %d input bytes: %s: %s", model_hash.hex(),
                        len(payload), type(e).__name__, e, exc_info=True)
            raise CVMPrecompileError(f"CVM run of model {model_hash.hex()} failed") from None
        log.debug("CVM precompile ran %s on %d bytes", model_hash.hex()[:12], len(payload))
        return computation

    return cvm_precompile
