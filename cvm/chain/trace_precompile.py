"""The embedded chain's trace precompile (0xC0DF, ICVMTrace in contracts/src/ICVM.sol): what the
dispute game needs to re-execute one step of a model on chain.

    0x00 ++ modelHash                                 -> abi (uint256 leafCount, uint256 outputLeaf)
    0x01 ++ modelHash ++ uint32 leaf ++ input tensors  -> abi (bytes32 outputLeaf, uint256[] producers, bytes32[] leaves)
    0x02 ++ modelHash ++ output bytes                 -> abi (bytes32 outputHash)

Gas, charged before anything runs, under the schedule of the model's opset (cvm.ops.SCHEDULES, as
cvm.gas.call_gas): the per-call charge (cvm.gas.call_base_gas, with opset 4's constant loading) and the
per-byte charge on the call data, plus for 0x01 the node's static cost (`Analysis.node_costs`), plus for 0x02 the output bytes again. As with
the inference precompile, every failure is one VMError that consumes the call's gas and names only
its kind (cvm/chain/trace.py holds the semantics). A model may have several inputs (trace leaves
0..k-1, spec section 11); DisputeGame computes their leaves from the request's input itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from eth.abc import ComputationAPI
from eth.exceptions import VMError
from eth_abi import encode

import cvm
from cvm.chain import trace
from cvm.chain.precompile import CVMPrecompileError
from cvm.chain.store import HASH_BYTES, ModelStore, StoreError
from cvm.gas import call_base_gas
from cvm.ops import SCHEDULES

log = logging.getLogger(__name__)

CVM_TRACE_ADDRESS = (0xC0DF).to_bytes(20, "big")  # ICVMTrace.PRECOMPILE
INFO, STEP, OUTPUT_HASH = 0, 1, 2


def trace_gas(model: cvm.Model, selector: int, data_length: int, leaf_index: int = 0) -> int:
    gas = call_base_gas(model) + SCHEDULES[model.graph.opset].io_gas(data_length)
    if selector == STEP:
        gas += trace.step_gas(model, leaf_index)
    return gas


def _load(store: ModelStore, model_hash: bytes) -> cvm.Model:
    try:
        model = store.get(model_hash)
    except StoreError:
        raise CVMPrecompileError(f"unknown or unloadable model {model_hash.hex()}") from None
    if len(model.graph.outputs) != 1:
        raise CVMPrecompileError("traces are defined for models with one output")
    return model


def _call(computation: ComputationAPI, store: ModelStore, data: bytes) -> bytes:
    if len(data) < 1 + HASH_BYTES:
        raise CVMPrecompileError("trace call data is shorter than a selector and a model hash")
    selector, model_hash, rest = data[0], data[1:1 + HASH_BYTES], data[1 + HASH_BYTES:]
    model = _load(store, model_hash)
    if selector == INFO:
        computation.consume_gas(trace_gas(model, INFO, len(data)), reason="CVM trace info")
        return encode(["uint256", "uint256"], [len(trace.tensor_names(model)), trace.output_leaf(model)])
    if selector == STEP:
        if len(rest) < 4:
            raise CVMPrecompileError("step call data has no leaf index")
        index = int.from_bytes(rest[:4], "big")
        try:
            trace.node_inputs(model, index)
        except ValueError:
            raise CVMPrecompileError(f"leaf {index} is not made by a node") from None
        computation.consume_gas(trace_gas(model, STEP, len(data), index), reason="CVM trace step")
        try:
            out, producers, leaves = trace.step(model, index, rest[4:])
        except (ValueError, cvm.CVMError) as e:
            raise CVMPrecompileError(f"step failed: {e}") from None
        return encode(["bytes32", "uint256[]", "bytes32[]"], [out, producers, leaves])
    if selector == OUTPUT_HASH:
        computation.consume_gas(trace_gas(model, OUTPUT_HASH, len(data) + len(rest)), reason="CVM output hash")
        try:
            return encode(["bytes32"], [cvm.output_hash(model.decode_output(rest))])
        except (ValueError, cvm.CVMError) as e:
            raise CVMPrecompileError(f"output bytes do not decode: {e}") from None
    raise CVMPrecompileError(f"unknown trace selector {selector}")


def make_trace_precompile(store: ModelStore) -> Callable[[ComputationAPI], ComputationAPI]:
    def trace_precompile(computation: ComputationAPI) -> ComputationAPI:
        data = bytes(computation.msg.data_as_bytes)
        try:
            computation.output = _call(computation, store, data)
        except VMError:
            raise
        except Exception as e:  # a bug, MemoryError, ...: the same clean failure on every node
            log.warning("CVM trace precompile failed: %s: %s", type(e).__name__, e, exc_info=True)
            raise CVMPrecompileError("CVM trace call failed") from None
        return computation

    return trace_precompile
