// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @notice What a contract implements to receive the result of an oracle inference request.
/// The oracle calls it once, with a bounded amount of gas, after the request is finalised;
/// a consumer must check that msg.sender is the oracle it trusts.
interface IInferenceConsumer {
    /// @param output the model's integer outputs, little-endian in their storage type
    ///        (int8 / int16 / int32, as the registry's output spec says).
    function onInferenceResult(uint256 requestId, bytes32 modelHash, bytes calldata output) external;
}
