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
