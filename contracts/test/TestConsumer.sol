// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {InferenceOracle} from "../src/InferenceOracle.sol";
import {IInferenceConsumer} from "../src/IInferenceConsumer.sol";

/// A consumer for the oracle tests. Depending on `mode` its callback records the output,
/// reverts, burns all its gas, or re-enters the oracle (claim, settle, reveal) and records
/// what each attempt returned.
contract TestConsumer is IInferenceConsumer {
    enum Mode {
        Record,
        Revert,
        Burn,
        Reenter
    }

    InferenceOracle public immutable oracle;
    Mode public mode;
    uint256 public calls;
    uint256 public lastRequestId;
    bytes public lastOutput;
    bytes4[] public reentryErrors; // selector of each failed re-entry, zero for a success

    constructor(InferenceOracle oracle_, Mode mode_) {
        oracle = oracle_;
        mode = mode_;
    }

    receive() external payable {}

    function request(bytes32 modelHash, bytes calldata input) external payable returns (uint256) {
        return oracle.request{value: msg.value}(modelHash, input, address(this));
    }

    function reentryErrorCount() external view returns (uint256) {
        return reentryErrors.length;
    }

    function onInferenceResult(uint256 requestId, bytes32, bytes calldata output) external {
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
            _reenter(abi.encodeCall(InferenceOracle.reveal, (requestId, 0, 0, output)));
        }
    }

    function _reenter(bytes memory data) private {
        (bool ok, bytes memory ret) = address(oracle).call(data);
        reentryErrors.push(ok || ret.length < 4 ? bytes4(0) : bytes4(ret));
    }
}
