// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {InferenceOracle, OracleCore} from "./InferenceOracle.sol";
import {IInferenceConsumer} from "./IInferenceConsumer.sol";

/// @title InferenceConsumer
/// @notice The base a contract inherits to use the oracle safely. It
///   - sends requests (`_requestInference`), storing nothing per request;
///   - accepts a callback only from the oracle and only for a request it made (`oracle.requesterOf`;
///     the oracle calls back once per request, with the model the request named): anyone can name
///     any contract as a callback, and a consumer that checked msg.sender alone would take results it
///     never asked for;
///   - pulls back the fee of an expired request (`reclaimExpired`, settling it first if due) and
///     hands it to `_onRefund` (the oracle credits refunds to the requester: this contract).
/// An inheriting contract implements `_onResult` and `_onRefund`:
///
///     contract Score is InferenceConsumer {
///         constructor(InferenceOracle o) InferenceConsumer(o) {}
///         function ask(bytes32 model, bytes calldata x) external payable returns (uint256) {
///             return _requestInference(model, x, msg.value, 0);
///         }
///         function _onResult(uint256 id, bytes calldata output) internal override { ... }
///         function _onRefund(uint256 id, uint256 fee) internal override { ... }
///     }
abstract contract InferenceConsumer is IInferenceConsumer {
    InferenceOracle public immutable oracle;
    /// Expired requests whose fee this contract took back. Nothing is stored per request otherwise:
    /// the oracle says who made a request (`requesterOf`), and calls back once per request.
    mapping(uint256 => bool) public reclaimed;
    /// Refunds pulled from the oracle and not yet handed to `_onRefund` (other expired requests').
    uint256 public refundPool;

    error NotOracle(address caller);
    error UnknownRequest(uint256 requestId);
    error NotExpired(uint256 requestId);

    constructor(InferenceOracle oracle_) {
        oracle = oracle_;
    }

    /// Refunds from the oracle arrive here (and any other payment the inheriting contract accepts).
    receive() external payable virtual {}

    /// Requests an inference for `fee` wei (at least oracle.feeFor(modelHash)); challengeWindow 0 is
    /// the fast k-of-n path, a positive one waits that long for disputes (one honest operator wins).
    function _requestInference(bytes32 modelHash, bytes calldata input, uint256 fee, uint64 challengeWindow)
        internal
        returns (uint256 requestId)
    {
        // always explicit: a plain `request` would give a consumer that holds value the longest window
        requestId = oracle.requestWithWindow{value: fee}(modelHash, input, address(this), challengeWindow);
    }

    /// The oracle names the request's model; a request this contract made has the model it asked for.
    function onInferenceResult(uint256 requestId, bytes32, bytes calldata output) external {
        if (msg.sender != address(oracle)) revert NotOracle(msg.sender);
        if (oracle.requesterOf(requestId) != address(this)) revert UnknownRequest(requestId);
        _onResult(requestId, output);
    }

    /// Takes back the fee of a request that expired (settling it first when that is due) and passes
    /// it to `_onRefund`. Anyone may call it.
    function reclaimExpired(uint256 requestId) public {
        if (oracle.statusOf(requestId) == OracleCore.Status.Pending) {
            try oracle.settle(requestId) {} catch {} // not due yet (BatchedOracle: settled with its round): NotExpired
        }
        if (oracle.statusOf(requestId) != OracleCore.Status.Expired) revert NotExpired(requestId);
        if (reclaimed[requestId] || oracle.requesterOf(requestId) != address(this)) revert UnknownRequest(requestId);
        reclaimed[requestId] = true;
        uint256 owed = oracle.claimable(address(this));
        if (owed > 0) {
            refundPool += owed;
            oracle.claim();
        }
        uint256 fee = oracle.refundOf(requestId); // BatchedOracle keeps no request record but this
        refundPool -= fee;
        _onRefund(requestId, fee);
    }

    /// The agreed output of a request this contract made (little-endian integers, the registry's
    /// output spec). Runs with the oracle's callbackGasLimit; a revert only shows as a failed callback.
    function _onResult(uint256 requestId, bytes calldata output) internal virtual;

    /// The fee of an expired request, now in this contract's balance.
    function _onRefund(uint256 requestId, uint256 fee) internal virtual;
}
