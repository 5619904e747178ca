// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "../ModelRegistry.sol";
import {InferenceOracle} from "../InferenceOracle.sol";
import {InferenceConsumer} from "../InferenceConsumer.sol";

/// @title CreditLine
/// @notice An under-collateralised credit line priced by a default-risk model run by the oracle
/// (examples/credit). A borrower applies with the model's integer input (each feature coded as its
/// position among the model's split thresholds, `cvm.Model.quantize_input`) and pays the oracle's fee;
/// the oracle's operators run the registered model and call back with its output, two little-endian
/// integers [-m, m], m the log-odds of default in the model's output units. The contract compares m with
/// integer cutoffs, loosest first: passing the first i cutoffs earns `sharesPct[i-1]` percent of `maxLine`,
/// passing none is a denial. A lending pool reads `creditLimit(borrower)`.
///
/// What this contract does not check: that the features are true. They are whatever the borrower sent
/// (their hash is recorded); in production they come signed by an attester the pool trusts, which the
/// pool verifies before lending (examples/credit/README.md).
contract CreditLine is InferenceConsumer {
    enum State {
        None,
        Pending,
        Approved,
        Denied
    }

    struct Line {
        State state;
        uint8 tier; // number of cutoffs passed; 0 when denied
        int64 score; // the model's log-odds of default, in output units (PD = sigmoid(score * step))
        uint256 limit;
        bytes32 featuresHash; // keccak256 of the input the decision was made on
        uint256 requestId;
    }

    bytes32 public immutable modelHash;
    uint256 public immutable elementBytes;
    uint256 public immutable maxLine;
    uint64 public immutable challengeWindow; // 0: trust the oracle's k-of-n majority
    int256[] public cutoffs; // strictly decreasing: the score must be below cutoffs[i] to pass it
    uint16[] public sharesPct; // non-decreasing, at most 100

    mapping(address => Line) public lines;
    mapping(uint256 => address) public applicant; // by oracle request id, until decided or refunded

    event Applied(uint256 indexed requestId, address indexed borrower, bytes32 featuresHash, uint256 fee);
    event Decided(uint256 indexed requestId, address indexed borrower, int256 score, uint8 tier, uint256 limit);
    event Refunded(uint256 indexed requestId, address indexed borrower, uint256 fee);

    error BadTiers();
    error NotTwoColumns(uint256 outputBytes, uint256 elementBytes);
    error ApplicationPending(address borrower, uint256 requestId);
    error WrongOutputLength(uint256 length, uint256 expected);
    error TransferFailed();

    constructor(
        InferenceOracle oracle_,
        bytes32 modelHash_,
        int256[] memory cutoffs_,
        uint16[] memory sharesPct_,
        uint256 maxLine_,
        uint64 challengeWindow_
    ) InferenceConsumer(oracle_) {
        if (cutoffs_.length == 0 || cutoffs_.length != sharesPct_.length || cutoffs_.length > type(uint8).max) {
            revert BadTiers();
        }
        for (uint256 i = 0; i < cutoffs_.length; i++) {
            if (sharesPct_[i] > 100 || (i > 0 && (cutoffs_[i] >= cutoffs_[i - 1] || sharesPct_[i] < sharesPct_[i - 1])))
            {
                revert BadTiers();
            }
        }
        modelHash = modelHash_;
        cutoffs = cutoffs_;
        sharesPct = sharesPct_;
        maxLine = maxLine_;
        challengeWindow = challengeWindow_;
        ModelRegistry.Model memory m = oracle_.registry().getModel(modelHash_);
        elementBytes = oracle_.registry().elementBytes(m.output.bits);
        if (m.outputBytes != 2 * elementBytes) revert NotTwoColumns(m.outputBytes, elementBytes);
    }

    /// Applies for a line: `features` is the model's encoded input; msg.value is the oracle fee
    /// (at least oracle.feeFor(modelHash)). A new application replaces a decided line when decided.
    function applyForCredit(bytes calldata features) external payable returns (uint256 requestId) {
        Line storage line = lines[msg.sender];
        if (line.state == State.Pending) revert ApplicationPending(msg.sender, line.requestId);
        requestId = _requestInference(modelHash, features, msg.value, challengeWindow);
        bytes32 featuresHash = keccak256(features);
        lines[msg.sender] = Line(State.Pending, 0, 0, 0, featuresHash, requestId);
        applicant[requestId] = msg.sender;
        emit Applied(requestId, msg.sender, featuresHash, msg.value);
    }

    /// The limit a lending pool may extend to `borrower` (0 unless approved).
    function creditLimit(address borrower) external view returns (uint256) {
        Line storage line = lines[borrower];
        return line.state == State.Approved ? line.limit : 0;
    }

    /// Number of cutoffs `score` passes (0: denied).
    function tierOf(int256 score) public view returns (uint8 tier) {
        uint256 n = cutoffs.length;
        while (tier < n && score < cutoffs[tier]) tier++;
    }

    function limitOf(uint8 tier) public view returns (uint256) {
        return tier == 0 ? 0 : maxLine * sharesPct[tier - 1] / 100;
    }

    function _onResult(uint256 requestId, bytes calldata output) internal override {
        if (output.length != 2 * elementBytes) revert WrongOutputLength(output.length, 2 * elementBytes);
        address borrower = applicant[requestId];
        delete applicant[requestId];
        int256 score = decodeInt(output, elementBytes, elementBytes); // column 1: m
        uint8 tier = tierOf(score);
        uint256 limit = limitOf(tier);
        Line storage line = lines[borrower];
        line.state = tier == 0 ? State.Denied : State.Approved;
        line.tier = tier;
        line.score = int64(score);
        line.limit = limit;
        emit Decided(requestId, borrower, score, tier, limit);
    }

    /// An expired application: the fee goes back to the borrower, who may apply again.
    function _onRefund(uint256 requestId, uint256 fee) internal override {
        address borrower = applicant[requestId];
        delete applicant[requestId];
        delete lines[borrower];
        emit Refunded(requestId, borrower, fee);
        (bool ok,) = payable(borrower).call{value: fee}("");
        if (!ok) revert TransferFailed();
    }

    /// Reads a little-endian two's-complement integer of `size` bytes at `offset`.
    function decodeInt(bytes calldata data, uint256 offset, uint256 size) public pure returns (int256) {
        uint256 raw = 0;
        for (uint256 b = 0; b < size; b++) {
            raw |= uint256(uint8(data[offset + b])) << (8 * b);
        }
        uint256 signBit = 1 << (8 * size - 1);
        return raw >= signBit ? int256(raw) - int256(signBit << 1) : int256(raw);
    }
}
