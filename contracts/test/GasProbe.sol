// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// A callback target for the oracle tests that records the gas its callback arrived with (its first
/// statement) and the output's length: the test compares that gas with the oracle's callbackGasLimit.
contract GasProbe {
    uint256 public gasAtEntry;
    uint256 public outputLength;
    uint256 public calls;

    function onInferenceResult(uint256, bytes32, bytes calldata output) external {
        uint256 g = gasleft();
        gasAtEntry = g;
        outputLength = output.length;
        calls += 1;
    }
}
