// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @notice What a contract implements to receive the result of an oracle inference request.
/// The oracle calls it once, with a bounded amount of gas, after the request is finalised.
/// Anyone can name any contract as a request's callback, so checking msg.sender is not enough: a
/// consumer must also check that it made the request and for which model. Inherit
/// `InferenceConsumer` (InferenceConsumer.sol), which does both and claims refunds.
interface IInferenceConsumer {
    /// @param output the model's integer outputs, little-endian in their storage type
    ///        (int8 / int16 / int32, as the registry's output spec says).
    function onInferenceResult(uint256 requestId, bytes32 modelHash, bytes calldata output) external;
}
