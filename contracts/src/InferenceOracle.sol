// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "./ModelRegistry.sol";
import {IInferenceConsumer} from "./IInferenceConsumer.sol";

/// @title InferenceOracle
/// @notice Asynchronous CVM inference on any EVM chain. Staked operators run the registered model
/// off chain and agree on the output by commit-reveal:
///
///   request ──▶ commit phase ──▶ reveal phase ──▶ finalised (k equal reveals) ──▶ callback
///                                             └──▶ expired (reveal deadline passed) ──▶ refund
///
/// 1. A requester pays a fee and names a registered model, one input sample and a callback. The
///    fee is at least `feeFor(modelHash)`: a minimum plus a price per unit of the model's gas.
/// 2. Up to n active operators commit keccak256(abi.encode(requestId, outputHash, salt, operator))
///    before the commit deadline. The operator is inside the hash, so a commitment cannot be
///    copied by someone else.
/// 3. The reveal phase opens when n operators have committed or the commit deadline passes.
///    Each operator reveals (outputHash, salt, output bytes). A reveal votes for the pair
///    (outputHash, keccak256(output)), so the bytes passed to the consumer are the agreed ones.
/// 4. The k-th equal vote finalises the request: the fee is split among the k agreeing
///    operators, operators that revealed something else are slashed, then the consumer is called
///    with a bounded amount of gas. A failing callback does not undo the finalisation.
/// 5. After the reveal deadline anyone may `settle`: an unfinalised request expires and its fee
///    is refunded; operators that committed but never revealed are slashed.
///
/// Payouts (fees, refunds, slashed stake for the treasury) are credited and pulled with `claim`.
contract InferenceOracle {
    struct Config {
        uint8 quorum; // k: equal reveals needed to finalise
        uint8 committeeSize; // n: most commits a request accepts
        uint128 minStake; // stake an operator needs to commit
        uint128 slashAmount; // taken from an operator per offence (at most its stake)
        uint128 minFee; // least fee a request pays, whatever the model
        uint128 feePerGas; // plus this much per unit of the model's registered CVM gas
        uint64 commitWindow; // seconds from the request to the commit deadline
        uint64 revealWindow; // seconds from the commit deadline to the reveal deadline
        uint64 withdrawalDelay; // seconds from requestUnstake to withdrawStake
        uint32 callbackGasLimit; // gas given to the consumer's callback
        address treasury; // receives slashed stake
    }

    enum Status {
        None,
        Pending,
        Finalized,
        Expired
    }

    enum SlashReason {
        WrongResult,
        MissedReveal
    }

    struct Request {
        bytes32 modelHash;
        address requester;
        uint64 commitDeadline;
        address callback;
        uint64 revealDeadline;
        uint8 commits;
        uint8 reveals;
        Status status;
        bool settled;
        uint128 fee;
        bytes32 result; // the agreed vote, keccak256(abi.encode(outputHash, keccak256(output)))
        bytes32 outputHash; // the agreed output hash
    }

    struct Submission {
        bytes32 commitment;
        bytes32 vote; // zero until revealed
        bool slashed;
    }

    struct Operator {
        uint128 stake;
        uint64 unlockTime; // zero while active; set by requestUnstake
    }

    uint256 public constant MAX_COMMITTEE = 16;
    /// Gas kept back for the work after the callback, on top of the 1/64 the EVM withholds.
    uint256 public constant CALLBACK_GAS_RESERVE = 20_000;

    ModelRegistry public immutable registry;
    uint8 public immutable quorum;
    uint8 public immutable committeeSize;
    uint128 public immutable minStake;
    uint128 public immutable slashAmount;
    uint128 public immutable minFee;
    uint128 public immutable feePerGas;
    uint64 public immutable commitWindow;
    uint64 public immutable revealWindow;
    uint64 public immutable withdrawalDelay;
    uint32 public immutable callbackGasLimit;
    address public immutable treasury;

    uint256 public requestCount;
    mapping(uint256 => Request) private _requests;
    mapping(uint256 => mapping(address => Submission)) private _submissions;
    mapping(uint256 => address[]) private _committers;
    mapping(uint256 => mapping(bytes32 => uint256)) public votes;
    mapping(address => Operator) public operators;
    mapping(address => uint256) public claimable;

    bool private transient _locked;

    event Staked(address indexed operator, uint256 amount, uint256 total);
    event UnstakeRequested(address indexed operator, uint64 unlockTime);
    event StakeWithdrawn(address indexed operator, uint256 amount);
    event InferenceRequested(
        uint256 indexed requestId,
        bytes32 indexed modelHash,
        address indexed requester,
        address callback,
        uint256 fee,
        uint64 commitDeadline,
        uint64 revealDeadline,
        bytes input
    );
    event Committed(uint256 indexed requestId, address indexed operator);
    event Revealed(uint256 indexed requestId, address indexed operator, bytes32 outputHash);
    event Finalized(uint256 indexed requestId, bytes32 outputHash, bytes output);
    event CallbackResult(uint256 indexed requestId, bool success);
    event Expired(uint256 indexed requestId);
    event Slashed(uint256 indexed requestId, address indexed operator, uint256 amount, SlashReason reason);
    event Claimed(address indexed account, uint256 amount);

    error InvalidConfig();
    error Reentrancy();
    error NotOperator(address account);
    error OperatorLeaving(address operator);
    error UnstakeNotRequested(address operator);
    error StakeLocked(uint64 unlockTime);
    error FeeTooLow(uint256 fee, uint256 required);
    error ModelNotAvailable(bytes32 modelHash);
    error InputLengthMismatch(uint256 length, uint256 expected);
    error UnknownRequest(uint256 requestId);
    error RequestNotPending(uint256 requestId);
    error CommitPhaseOver(uint256 requestId);
    error CommitteeFull(uint256 requestId);
    error EmptyCommitment();
    error AlreadyCommitted(uint256 requestId, address operator);
    error NotCommitted(uint256 requestId, address operator);
    error AlreadyRevealed(uint256 requestId, address operator);
    error RevealPhaseNotOpen(uint256 requestId);
    error RevealPhaseOver(uint256 requestId);
    error CommitmentMismatch(uint256 requestId, address operator);
    error RevealPhaseNotOver(uint256 requestId);
    error AlreadySettled(uint256 requestId);
    error InsufficientGasForCallback(uint256 available, uint256 needed);
    error NothingToClaim(address account);
    error TransferFailed(address to, uint256 amount);

    modifier nonReentrant() {
        if (_locked) revert Reentrancy();
        _locked = true;
        _;
        _locked = false;
    }

    modifier onlyActiveOperator() {
        if (!isOperator(msg.sender)) revert NotOperator(msg.sender);
        _;
    }

    constructor(ModelRegistry registry_, Config memory c) {
        if (
            address(registry_) == address(0) || c.treasury == address(0) || c.quorum == 0
                || c.quorum > c.committeeSize || c.committeeSize > MAX_COMMITTEE || c.minStake == 0
                || c.slashAmount > c.minStake || c.commitWindow == 0 || c.revealWindow == 0
                || c.withdrawalDelay <= uint256(c.commitWindow) + c.revealWindow
        ) revert InvalidConfig();
        registry = registry_;
        quorum = c.quorum;
        committeeSize = c.committeeSize;
        minStake = c.minStake;
        slashAmount = c.slashAmount;
        minFee = c.minFee;
        feePerGas = c.feePerGas;
        commitWindow = c.commitWindow;
        revealWindow = c.revealWindow;
        withdrawalDelay = c.withdrawalDelay;
        callbackGasLimit = c.callbackGasLimit;
        treasury = c.treasury;
    }

    // ---------------------------------------------------------------- staking

    function stake() external payable {
        Operator storage op = operators[msg.sender];
        if (op.unlockTime != 0) revert OperatorLeaving(msg.sender);
        op.stake += uint128(msg.value);
        emit Staked(msg.sender, msg.value, op.stake);
    }

    /// Stops taking new requests; the stake can be withdrawn after `withdrawalDelay`, which is
    /// longer than a request's life, so an offence committed before leaving can still be slashed.
    function requestUnstake() external {
        Operator storage op = operators[msg.sender];
        if (op.stake == 0) revert NotOperator(msg.sender);
        if (op.unlockTime != 0) revert OperatorLeaving(msg.sender);
        op.unlockTime = uint64(block.timestamp) + withdrawalDelay;
        emit UnstakeRequested(msg.sender, op.unlockTime);
    }

    function withdrawStake() external nonReentrant {
        Operator storage op = operators[msg.sender];
        if (op.unlockTime == 0) revert UnstakeNotRequested(msg.sender);
        if (block.timestamp < op.unlockTime) revert StakeLocked(op.unlockTime);
        uint256 amount = op.stake;
        delete operators[msg.sender];
        emit StakeWithdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    function isOperator(address account) public view returns (bool) {
        Operator storage op = operators[account];
        return op.stake >= minStake && op.unlockTime == 0;
    }

    // ---------------------------------------------------------------- requests

    /// The least fee a request for this model pays: the operators' work grows with the model's
    /// static cost, so the fee does too.
    function feeFor(bytes32 modelHash) public view returns (uint256) {
        return uint256(minFee) + uint256(feePerGas) * registry.getModel(modelHash).gas;
    }

    function request(bytes32 modelHash, bytes calldata input, address callback)
        external
        payable
        returns (uint256 requestId)
    {
        if (!registry.isActive(modelHash)) revert ModelNotAvailable(modelHash);
        uint256 required = feeFor(modelHash);
        if (msg.value < required) revert FeeTooLow(msg.value, required);
        uint256 expected = registry.inputBytes(modelHash);
        if (input.length != expected) revert InputLengthMismatch(input.length, expected);

        requestId = ++requestCount;
        Request storage r = _requests[requestId];
        r.modelHash = modelHash;
        r.requester = msg.sender;
        r.callback = callback;
        r.fee = uint128(msg.value);
        r.commitDeadline = uint64(block.timestamp) + commitWindow;
        r.revealDeadline = r.commitDeadline + revealWindow;
        r.status = Status.Pending;
        emit InferenceRequested(
            requestId, modelHash, msg.sender, callback, msg.value, r.commitDeadline, r.revealDeadline, input
        );
    }

    function commit(uint256 requestId, bytes32 commitment) external onlyActiveOperator {
        Request storage r = _pending(requestId);
        if (block.timestamp > r.commitDeadline) revert CommitPhaseOver(requestId);
        if (r.commits >= committeeSize) revert CommitteeFull(requestId);
        if (commitment == bytes32(0)) revert EmptyCommitment();
        Submission storage s = _submissions[requestId][msg.sender];
        if (s.commitment != bytes32(0)) revert AlreadyCommitted(requestId, msg.sender);

        s.commitment = commitment;
        _committers[requestId].push(msg.sender);
        r.commits += 1;
        emit Committed(requestId, msg.sender);
    }

    /// Reveals a commitment. Allowed after finalisation too (until the reveal deadline), so that
    /// a slow honest operator is not slashed for a missed reveal; it earns no fee then.
    function reveal(uint256 requestId, bytes32 outputHash, bytes32 salt, bytes calldata output)
        external
        nonReentrant
    {
        Request storage r = _requests[requestId];
        Submission storage s = _submissions[requestId][msg.sender];
        if (s.commitment == bytes32(0)) revert NotCommitted(requestId, msg.sender);
        if (s.vote != bytes32(0)) revert AlreadyRevealed(requestId, msg.sender);
        if (r.status == Status.Expired) revert RequestNotPending(requestId);
        if (!revealOpen(requestId)) revert RevealPhaseNotOpen(requestId);
        if (block.timestamp > r.revealDeadline) revert RevealPhaseOver(requestId);
        if (commitmentFor(requestId, outputHash, salt, msg.sender) != s.commitment) {
            revert CommitmentMismatch(requestId, msg.sender);
        }

        bytes32 vote = keccak256(abi.encode(outputHash, keccak256(output)));
        s.vote = vote;
        r.reveals += 1;
        emit Revealed(requestId, msg.sender, outputHash);

        if (r.status == Status.Finalized) {
            if (vote != r.result) _slash(requestId, msg.sender, SlashReason.WrongResult);
        } else if (++votes[requestId][vote] == quorum) {
            _finalize(requestId, r, vote, outputHash, output);
        }
    }

    /// After the reveal deadline: expires an unfinalised request (refunding its fee) and slashes
    /// every operator that committed but did not reveal. Anyone may call it, once per request.
    function settle(uint256 requestId) external nonReentrant {
        Request storage r = _requests[requestId];
        if (r.status == Status.None) revert UnknownRequest(requestId);
        if (r.settled) revert AlreadySettled(requestId);
        if (block.timestamp <= r.revealDeadline) revert RevealPhaseNotOver(requestId);
        r.settled = true;

        if (r.status == Status.Pending) {
            r.status = Status.Expired;
            claimable[r.requester] += r.fee;
            emit Expired(requestId);
        }
        address[] storage committers = _committers[requestId];
        for (uint256 i = 0; i < committers.length; i++) {
            if (_submissions[requestId][committers[i]].vote == bytes32(0)) {
                _slash(requestId, committers[i], SlashReason.MissedReveal);
            }
        }
    }

    function claim() external nonReentrant {
        uint256 amount = claimable[msg.sender];
        if (amount == 0) revert NothingToClaim(msg.sender);
        claimable[msg.sender] = 0;
        emit Claimed(msg.sender, amount);
        _send(msg.sender, amount);
    }

    // ---------------------------------------------------------------- views

    function commitmentFor(uint256 requestId, bytes32 outputHash, bytes32 salt, address operator)
        public
        pure
        returns (bytes32)
    {
        return keccak256(abi.encode(requestId, outputHash, salt, operator));
    }

    function revealOpen(uint256 requestId) public view returns (bool) {
        Request storage r = _requests[requestId];
        return r.status != Status.None && (r.commits >= committeeSize || block.timestamp > r.commitDeadline);
    }

    function statusOf(uint256 requestId) external view returns (Status) {
        return _requests[requestId].status;
    }

    function getRequest(uint256 requestId) external view returns (Request memory) {
        return _requests[requestId];
    }

    function getSubmission(uint256 requestId, address operator) external view returns (Submission memory) {
        return _submissions[requestId][operator];
    }

    function committersOf(uint256 requestId) external view returns (address[] memory) {
        return _committers[requestId];
    }

    // ---------------------------------------------------------------- internals

    function _pending(uint256 requestId) private view returns (Request storage r) {
        r = _requests[requestId];
        if (r.status == Status.None) revert UnknownRequest(requestId);
        if (r.status != Status.Pending) revert RequestNotPending(requestId);
    }

    /// Effects first (status, payouts, slashing), then the bounded callback.
    function _finalize(uint256 requestId, Request storage r, bytes32 vote, bytes32 outputHash, bytes calldata output)
        private
    {
        r.status = Status.Finalized;
        r.result = vote;
        r.outputHash = outputHash;

        uint256 share = r.fee / quorum;
        uint256 remainder = r.fee - share * quorum;
        address[] storage committers = _committers[requestId];
        for (uint256 i = 0; i < committers.length; i++) {
            address op = committers[i];
            bytes32 v = _submissions[requestId][op].vote;
            if (v == vote) {
                claimable[op] += share + remainder;
                remainder = 0;
            } else if (v != bytes32(0)) {
                _slash(requestId, op, SlashReason.WrongResult);
            }
        }
        emit Finalized(requestId, outputHash, output);

        if (r.callback != address(0)) _callback(requestId, r.callback, r.modelHash, output);
    }

    /// Calls the consumer with exactly `callbackGasLimit` gas (the caller must supply enough so
    /// the 63/64 rule cannot starve it) and without copying its return data.
    function _callback(uint256 requestId, address target, bytes32 modelHash, bytes calldata output) private {
        uint256 needed = (uint256(callbackGasLimit) * 64) / 63 + CALLBACK_GAS_RESERVE;
        if (gasleft() < needed) revert InsufficientGasForCallback(gasleft(), needed);
        bytes memory data = abi.encodeCall(IInferenceConsumer.onInferenceResult, (requestId, modelHash, output));
        uint256 gasLimit = callbackGasLimit;
        bool success;
        assembly ("memory-safe") {
            success := call(gasLimit, target, 0, add(data, 32), mload(data), 0, 0)
        }
        emit CallbackResult(requestId, success);
    }

    function _slash(uint256 requestId, address operator, SlashReason reason) private {
        Submission storage s = _submissions[requestId][operator];
        if (s.slashed) return;
        s.slashed = true;
        Operator storage op = operators[operator];
        uint128 amount = op.stake < slashAmount ? op.stake : slashAmount;
        op.stake -= amount;
        claimable[treasury] += amount;
        emit Slashed(requestId, operator, amount, reason);
    }

    function _send(address to, uint256 amount) private {
        (bool ok,) = payable(to).call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}
