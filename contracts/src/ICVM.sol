// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @title ICVM
/// @notice Synchronous inference through the CVM precompile of the project's embedded chain.
/// The precompile takes raw calldata `modelHash (32 bytes) ++ input bytes` and returns the raw
/// output bytes (little-endian integers in their storage type). It charges the model's static gas
/// per sample plus a per-byte charge; an unknown model, a wrong input length or too little gas
/// make the call fail and consume the gas given to it.
/// A chain without the precompile has no code at its address: a call there "succeeds" with no
/// output, which `infer` reports as `CVMUnavailable`.
library ICVM {
    /// Must equal cvm.chain.precompile.CVM_PRECOMPILE_ADDRESS.
    address internal constant PRECOMPILE = address(0xC0DE);

    error CVMCallFailed(bytes32 modelHash);
    error CVMUnavailable();

    function infer(bytes32 modelHash, bytes memory input) internal view returns (bytes memory output) {
        bool ok;
        (ok, output) = PRECOMPILE.staticcall(abi.encodePacked(modelHash, input));
        if (!ok) revert CVMCallFailed(modelHash);
        if (output.length == 0) revert CVMUnavailable();
    }
}

/// @title ICVMTrace
/// @notice The embedded chain's second precompile, for the dispute game: facts of a model's trace and
/// the re-execution of one step. A trace is the list of a run's tensors in graph order (the input,
/// then every node's output), each as a leaf keccak256(its wire bytes: little-endian storage type).
///   0x00 ++ modelHash                                -> abi (uint256 leafCount, uint256 outputLeaf)
///   0x01 ++ modelHash ++ uint32 leaf ++ input tensors -> abi (bytes32 outputLeaf, uint256[] producers, bytes32[] leaves)
///   0x02 ++ modelHash ++ output bytes                -> abi (bytes32 outputHash)   (spec section 10)
/// Step 0x01 runs the node that makes `leaf` on the given tensors (its distinct non-constant inputs
/// in order, wire bytes back to back) and returns its output's leaf, and for each input the leaf
/// index that made it and its leaf (to be proven against the trace). It charges the node's gas.
library ICVMTrace {
    /// Must equal cvm.chain.trace_precompile.CVM_TRACE_ADDRESS.
    address internal constant TRACE_PRECOMPILE = address(0xC0DF);

    error CVMTraceCallFailed(bytes32 modelHash, uint8 selector);

    function traceInfo(bytes32 modelHash) internal view returns (uint256 leafCount, uint256 outputLeaf) {
        bytes memory ret = _call(modelHash, 0, abi.encodePacked(uint8(0), modelHash));
        return abi.decode(ret, (uint256, uint256));
    }

    function step(bytes32 modelHash, uint256 leaf, bytes calldata inputs)
        internal
        view
        returns (bytes32 outputLeaf, uint256[] memory producers, bytes32[] memory leaves)
    {
        bytes memory ret = _call(modelHash, 1, abi.encodePacked(uint8(1), modelHash, uint32(leaf), inputs));
        return abi.decode(ret, (bytes32, uint256[], bytes32[]));
    }

    function outputHash(bytes32 modelHash, bytes calldata output) internal view returns (bytes32) {
        return abi.decode(_call(modelHash, 2, abi.encodePacked(uint8(2), modelHash, output)), (bytes32));
    }

    function _call(bytes32 modelHash, uint8 selector, bytes memory data) private view returns (bytes memory ret) {
        bool ok;
        (ok, ret) = TRACE_PRECOMPILE.staticcall(data);
        if (!ok || ret.length == 0) revert CVMTraceCallFailed(modelHash, selector);
    }
}
