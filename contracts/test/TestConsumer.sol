// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {InferenceOracle} from "../src/InferenceOracle.sol";
import {InferenceConsumer} from "../src/InferenceConsumer.sol";

/// A consumer for the oracle tests, built on InferenceConsumer. Depending on `mode` its callback
/// records the output, reverts, burns all its gas, or re-enters the oracle (claim, settle, reveal)
/// and records what each attempt returned.
contract TestConsumer is InferenceConsumer {
    enum Mode {
        Record,
        Revert,
        Burn,
        Reenter
    }

    Mode public mode;
    uint256 public calls;
    uint256 public lastRequestId;
    bytes public lastOutput;
    uint256 public refunded;
    bytes4[] public reentryErrors; // selector of each failed re-entry, zero for a success

    constructor(InferenceOracle oracle_, Mode mode_) InferenceConsumer(oracle_) {
        mode = mode_;
    }

    function request(bytes32 modelHash, bytes calldata input) external payable returns (uint256) {
        return _requestInference(modelHash, input, msg.value, 0);
    }

    function requestWithWindow(bytes32 modelHash, bytes calldata input, uint64 window) external payable returns (uint256) {
        return _requestInference(modelHash, input, msg.value, window);
    }

    function reentryErrorCount() external view returns (uint256) {
        return reentryErrors.length;
    }

    function _onResult(uint256 requestId, bytes calldata output) internal override {
        if (mode == Mode.Revert) revert("consumer says no");
        if (mode == Mode.Burn) {
            while (true) {}
        }
        calls += 1;
        lastRequestId = requestId;
        lastOutput = output;
        if (mode == Mode.Reenter) {
            _reenter(abi.encodeCall(InferenceOracle.claim, ()));
            _reenter(abi.encodeCall(InferenceOracle.settle, (requestId)));
            _reenter(abi.encodeCall(InferenceOracle.reveal, (requestId, 0, 0, 0, output)));
        }
    }

    function _onRefund(uint256, uint256 fee) internal override {
        refunded += fee;
    }

    function _reenter(bytes memory data) private {
        (bool ok, bytes memory ret) = address(oracle).call(data);
        reentryErrors.push(ok || ret.length < 4 ? bytes4(0) : bytes4(ret));
    }
}
