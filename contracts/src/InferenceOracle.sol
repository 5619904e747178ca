// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "./ModelRegistry.sol";
import {IInferenceConsumer} from "./IInferenceConsumer.sol";
import {DisputeGame} from "./DisputeGame.sol";
import {Referee} from "./Referee.sol";

/// @title InferenceOracle
/// @notice Asynchronous CVM inference on any EVM chain. Staked operators run the registered model
/// off chain, commit to their output and to their whole execution trace, reveal, and a dispute
/// game re-executes one step on chain when two of them disagree:
///
///   request ──▶ commit (every drawn operator, until the deadline) ──▶ reveal ──┬─▶ window 0: a majority finalises at once
///                                                                              └─▶ window W: after W, the one result no
///                                                                                  dispute refuted finalises (`finalize`)
///   disagreement ──▶ openDispute (a member) / challenge (a staked operator without a seat)
///                ──▶ DisputeGame (bisection, one step re-executed) ──▶ loser slashed
///
/// 1. A requester pays at least `feeFor(modelHash)` and names a registered model, one input sample,
///    a callback and a challenge window (0: trust the committee's majority, the fast path; a plain
///    `request` from a callback that holds value gets the longest window).
/// 2. Operators are drawn by stake: operator o may commit to request r when
///    keccak256(abi.encode(blockhash(requestBlock), r, o)) mod totalStake < stake(o) * n,
///    so each holds about n * stake / totalStake of the n expected seats whatever the number of
///    addresses its stake is split over. Every drawn operator that commits before the commit
///    deadline is seated (at most MAX_COMMITTEE), and reveals open only after it: no seat is won by
///    speed. Each commit locks the request's bond (`bondFor`: priced from the model's worst-case
///    dispute gas) until the request is closed: one stake cannot block unbounded requests.
/// 3. A commitment is keccak256(abi.encode(requestId, outputHash, keccak256(output), traceRoot, salt,
///    operator)), where traceRoot is the Merkle root of every tensor of the run (docs/chain.md): only
///    the committed output bytes can be revealed, whoever submits them.
/// 4. A reveal votes for (outputHash, keccak256(output), traceRoot). Nobody is slashed for
///    disagreeing: a member disputes another vote with `openDispute`, an operator without a seat with
///    `challenge` (a bond and its own claim); the game finds the first step where the traces differ
///    and re-executes it; a refuted vote's voters are all slashed, half of it to the winner. A timeout
///    slashes only the player that missed its move (its vote falls once all its voters are slashed).
/// 5. `settle` after the reveal deadline (plus the window, and once no dispute is open): expires an
///    unfinalised request (refund), slashes committers that never revealed, releases the bonds.
///
/// Payouts (fees, refunds, slashed stake) are credited and pulled with `claim`.
/// @title OracleCore
/// @notice What both request paths share: configuration, staking, bonds' accounting, fees and
/// payouts, the stake-weighted draw and the consumer's callback. `InferenceOracle` keeps each request
/// in storage and takes one transaction per commit and reveal; `BatchedOracle` keeps one hash per
/// request and takes the committee's signed commits and its reveals in one transaction each.
abstract contract OracleCore {
    struct Config {
        uint8 quorum; // k: equal reveals that finalise a request with a zero challenge window
        uint8 committeeSize; // n: seats per request (commits accepted; the draw's expected size)
        uint128 minStake; // stake an operator needs to be drawn
        uint128 slashAmount; // bond locked per commit, and taken per offence
        uint128 minFee; // least fee a request pays, whatever the model
        uint128 feePerGas; // plus this much per unit of the model's registered CVM gas
        uint128 operatorGasPrice; // plus this much per unit of the chain gas the operators spend
        uint64 commitWindow; // seconds from the request to the commit deadline
        uint64 revealWindow; // seconds from the commit deadline to the reveal deadline
        uint64 withdrawalDelay; // seconds from requestUnstake to withdrawStake
        uint64 maxChallengeWindow; // the longest challenge window a request may ask for
        uint64 disputeMoveTime; // seconds each party has for each move of a dispute
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
        WrongResult, // a vote a dispute proved wrong
        MissedReveal, // committed and never revealed
        MissedMove // a dispute's player that let a move's deadline pass
    }

    /// A request as `getRequest` shows it (the stored layout, `Stored`, is packed for gas).

    /// Two slots, both nonzero once staked. The draw reads the first; a commit locks its bond in the
    /// second, and finalisation releases the bond and credits the fee in that same slot: one rewrite
    /// (2,900 gas) per payee. `earned` holds 1 + the unclaimed fees from the first deposit on, so that
    /// slot never empties and a bond never pays 20,000 to fill it.
    struct Operator {
        uint128 stake;
        uint64 unlockTime; // zero while active; set by requestUnstake
        uint64 stakedAt; // block of the last deposit: counts for requests of later blocks only
        uint128 locked; // bonds of open requests
        uint128 earned; // 1 + fees and rewards not yet claimed (part of `claimable`); 0 without a record
    }

    uint256 public constant MAX_COMMITTEE = 16;
    uint256 public constant MAX_CALLBACK_GAS = 5_000_000;
    /// Gas kept back for the work after the callback, on top of the 1/64 the EVM withholds.
    uint256 public constant CALLBACK_GAS_RESERVE = 20_000;
    /// revealGas: a reveal's own work, and what finalising adds per committer (payment, bond).
    uint256 public constant REVEAL_BASE_GAS = 150_000;
    uint256 public constant PER_COMMITTER_GAS = 40_000;
    /// feeFor: the chain gas one operator spends on a commit and a reveal, before output bytes.
    uint256 public constant OPERATOR_ROUND_GAS = 200_000;

    ModelRegistry public immutable registry;
    DisputeGame public immutable disputeGame;
    uint8 public immutable quorum;
    uint8 public immutable committeeSize;
    uint128 public immutable minStake;
    uint128 public immutable slashAmount;
    uint128 public immutable minFee;
    uint128 public immutable feePerGas;
    uint128 public immutable operatorGasPrice;
    uint64 public immutable commitWindow;
    uint64 public immutable revealWindow;
    uint64 public immutable withdrawalDelay;
    uint64 public immutable maxChallengeWindow;
    uint32 public immutable callbackGasLimit;
    address public immutable treasury;

    /// The next request id; nonzero from deployment, so a request rewrites it (2,900) instead of the
    /// first one filling it (20,000).
    uint256 private _nextRequestId = 1;
    uint256 public totalStake; // stake of active operators (stake >= minStake, not leaving)
    mapping(uint256 => mapping(bytes32 => bool)) public refuted; // votes a dispute proved wrong
    mapping(uint256 => mapping(bytes32 => bool)) public disputed; // keccak(vote, vote) pairs already disputed
    mapping(address => Operator) internal _operators;
    mapping(address => uint256) internal _claimable; // accounts other than operators (see `_credit`)
    mapping(uint256 => mapping(address => bool)) public slashedIn; // request -> operator -> its bond taken
    /// request -> vote -> the outside challengers that claimed it (slashed with it if a game proves it wrong)
    mapping(uint256 => mapping(bytes32 => address[])) internal _outsiders;
    /// request -> vote -> the outside challengers whose claim won a game (finalising it pays them)
    mapping(uint256 => mapping(bytes32 => address[])) internal _outsideWinners;
    /// Votes with which an outside challenger won a game: they stand beside the committee's for
    /// `finalize`. A claim that never won (its challenger lost or stopped) never counts.
    mapping(uint256 => bytes32[]) internal _outsideVotes;
    /// request -> dispute key (`_disputeKey`) -> the bond its outside challenger locked, until the game ends
    mapping(uint256 => mapping(bytes32 => uint128)) public challengeBondOf;

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
        uint64 challengeWindow,
        bytes input
    );
    event Committed(uint256 indexed requestId, address indexed operator);
    event Revealed(
        uint256 indexed requestId, address indexed operator, bytes32 outputHash, bytes32 outputKeccak, bytes32 traceRoot
    );
    event Finalized(uint256 indexed requestId, bytes32 outputHash, bytes output);
    event CallbackResult(uint256 indexed requestId, bool success);
    event Expired(uint256 indexed requestId);
    event DisputeOpened(uint256 indexed requestId, uint256 indexed disputeId, address challenger, address defender);
    event VoteRefuted(uint256 indexed requestId, bytes32 vote);
    event Slashed(uint256 indexed requestId, address indexed operator, uint256 amount, SlashReason reason);
    event Claimed(address indexed account, uint256 amount);

    error InvalidConfig();
    error Reentrancy();
    error NotOperator(address account);
    error NotDisputeGame(address caller);
    error OperatorLeaving(address operator);
    error UnstakeNotRequested(address operator);
    error StakeLocked(uint64 unlockTime);
    error BondsLocked(uint256 locked);
    error FeeTooLow(uint256 fee, uint256 required);
    error ModelNotAvailable(bytes32 modelHash);
    error InputLengthMismatch(uint256 length, uint256 expected);
    error ChallengeWindowTooLong(uint256 window, uint256 max);
    error UnknownRequest(uint256 requestId);
    error RequestNotPending(uint256 requestId);
    error CommitPhaseOver(uint256 requestId);
    error CommitteeFull(uint256 requestId);
    error SeedNotReady(uint256 requestId);
    error SeedUnavailable(uint256 requestId);
    error NotDrawn(uint256 requestId, address operator);
    error InsufficientFreeStake(uint256 free, uint256 needed);
    error EmptyCommitment();
    error AlreadyCommitted(uint256 requestId, address operator);
    error NotCommitted(uint256 requestId, address operator);
    error AlreadyRevealed(uint256 requestId, address operator);
    error RevealPhaseNotOpen(uint256 requestId);
    error RevealPhaseOver(uint256 requestId);
    error WrongOutputLength(uint256 length, uint256 expected);
    error CommitmentMismatch(uint256 requestId, address operator);
    error RevealPhaseNotOver(uint256 requestId);
    error ChallengeWindowOpen(uint256 requestId);
    error DisputesOpen(uint256 requestId);
    error AlreadySettled(uint256 requestId);
    error ResultAwaitsFinalize(uint256 requestId);
    error NoUniqueResult(uint256 requestId);
    error NotRevealed(uint256 requestId, address operator);
    error ClaimMismatch(address operator);
    error SameVote();
    error VoteAlreadyRefuted(bytes32 vote);
    error AlreadyDisputed(uint256 requestId);
    error DisputeWindowOver(uint256 requestId);
    error InsufficientGasForCallback(uint256 available, uint256 needed);
    error NothingToClaim(address account);
    error TransferFailed(address to, uint256 amount);
    error SeatedOperator(uint256 requestId, address operator);

    modifier nonReentrant() {
        if (_locked) revert Reentrancy();
        _locked = true;
        _;
        _locked = false;
    }

    /// `referee_`: the Solidity Referee its DisputeGame uses where no trace precompile exists,
    /// deployed once, separately (cvm/chain/contracts.py deploy_oracle).
    constructor(ModelRegistry registry_, Referee referee_, Config memory c) {
        disputeGame = new DisputeGame(c.disputeMoveTime, referee_);
        if (
            address(registry_) == address(0) || address(referee_).code.length == 0 || c.treasury == address(0) || c.quorum == 0
                || c.quorum > c.committeeSize || c.committeeSize > MAX_COMMITTEE || c.minStake == 0
                || c.slashAmount == 0 || c.slashAmount > c.minStake || c.commitWindow == 0 || c.revealWindow == 0
                || c.disputeMoveTime == 0 || c.callbackGasLimit > MAX_CALLBACK_GAS
                || c.commitWindow > type(uint32).max || c.revealWindow > type(uint32).max
                || c.withdrawalDelay <= uint256(c.commitWindow) + c.revealWindow + c.maxChallengeWindow
                    + disputeGame.maxDuration()
        ) revert InvalidConfig();
        registry = registry_;
        quorum = c.quorum;
        committeeSize = c.committeeSize;
        minStake = c.minStake;
        slashAmount = c.slashAmount;
        minFee = c.minFee;
        feePerGas = c.feePerGas;
        operatorGasPrice = c.operatorGasPrice;
        commitWindow = c.commitWindow;
        revealWindow = c.revealWindow;
        withdrawalDelay = c.withdrawalDelay;
        maxChallengeWindow = c.maxChallengeWindow;
        callbackGasLimit = c.callbackGasLimit;
        treasury = c.treasury;
    }

    // ---------------------------------------------------------------- staking

    function stake() external payable {
        Operator storage op = _operators[msg.sender];
        if (op.unlockTime != 0) revert OperatorLeaving(msg.sender);
        _setStake(op, op.stake + uint128(msg.value));
        op.stakedAt = uint64(block.number);
        if (op.earned == 0) op.earned = 1; // the record's mark (see Operator)
        emit Staked(msg.sender, msg.value, op.stake);
    }

    /// Stops being drawn; the stake can be withdrawn after `withdrawalDelay` (longer than a request's
    /// life and its disputes) once no bond is locked in an open request.
    function requestUnstake() external {
        Operator storage op = _operators[msg.sender];
        if (op.stake == 0) revert NotOperator(msg.sender);
        if (op.unlockTime != 0) revert OperatorLeaving(msg.sender);
        totalStake -= _weight(op);
        op.unlockTime = uint64(block.timestamp) + withdrawalDelay;
        emit UnstakeRequested(msg.sender, op.unlockTime);
    }

    /// Pays out the stake; fees earned and not claimed stay claimable.
    function withdrawStake() external nonReentrant {
        Operator storage op = _operators[msg.sender];
        if (op.unlockTime == 0) revert UnstakeNotRequested(msg.sender);
        if (block.timestamp < op.unlockTime) revert StakeLocked(op.unlockTime);
        if (op.locked != 0) revert BondsLocked(op.locked);
        uint256 amount = op.stake;
        _claimable[msg.sender] += _earned(op);
        delete _operators[msg.sender];
        emit StakeWithdrawn(msg.sender, amount);
        _send(msg.sender, amount);
    }

    function isOperator(address account) public view returns (bool) {
        return _weight(_operators[account]) != 0;
    }

    /// An operator's stake, unlock time (zero while active), block of its last deposit and locked bonds.
    function operators(address account)
        external
        view
        returns (uint128 stake_, uint64 unlockTime, uint64 stakedAt, uint128 locked)
    {
        Operator storage op = _operators[account];
        return (op.stake, op.unlockTime, op.stakedAt, op.locked);
    }

    /// What `claim` pays `account`: fees, rewards and refunds credited to it.
    function claimable(address account) public view returns (uint256) {
        return _claimable[account] + _earned(_operators[account]);
    }

    /// How many requests were made.
    function requestCount() external view returns (uint256) {
        return _nextRequestId - 1;
    }

    /// The consumer's check: who made the request. InferenceOracle reads its record; BatchedOracle,
    /// which keeps none, answers for the request it is calling back and for expired ones.
    function requesterOf(uint256 requestId) external view virtual returns (address);

    /// A request with the default window (`_defaultWindow`): the fast path (0: k equal reveals are
    /// final once revealed) when the callback holds no value, the longest window when it does.
    /// `requestWithWindow` names the window, 0 included.
    function request(bytes32 modelHash, bytes calldata input, address callback) external payable returns (uint256) {
        return _request(modelHash, input, callback, _defaultWindow(callback));
    }

    /// A request whose result is final `challengeWindow` seconds after the reveal deadline, if no
    /// dispute refuted it: one honest drawn operator is then enough.
    function requestWithWindow(bytes32 modelHash, bytes calldata input, address callback, uint64 challengeWindow)
        external
        payable
        returns (uint256)
    {
        if (challengeWindow > maxChallengeWindow) revert ChallengeWindowTooLong(challengeWindow, maxChallengeWindow);
        return _request(modelHash, input, callback, challengeWindow);
    }

    /// How each oracle records a request that `_admit` let in.
    function _request(bytes32 modelHash, bytes calldata input, address callback, uint64 window)
        internal
        virtual
        returns (uint256 requestId);

    /// The checks every request passes (model active, fee, input length), its new id, the model's
    /// output size and the bond each seat locks (`bondFor`).
    function _admit(bytes32 modelHash, bytes calldata input)
        internal
        returns (uint256 id, uint32 outputBytes, uint128 bond)
    {
        (bool active, uint64 gas, uint32 inputBytes, uint32 outputBytes_, uint64 disputeGas) = registry.terms(modelHash);
        if (!active) revert ModelNotAvailable(modelHash);
        uint256 required = _fee(gas, outputBytes_);
        if (msg.value < required) revert FeeTooLow(msg.value, required);
        if (input.length != inputBytes) revert InputLengthMismatch(input.length, inputBytes);
        (id, outputBytes, bond) = (_nextRequestId, outputBytes_, _bond(disputeGas));
        _nextRequestId = id + 1;
    }

    function _earned(Operator storage op) internal view returns (uint256) {
        uint256 e = op.earned;
        return e == 0 ? 0 : e - 1;
    }

    /// The least fee a request for this model pays: minFee + feePerGas * (registered CVM gas)
    /// + operatorGasPrice * (n * (OPERATOR_ROUND_GAS + 16 * outputBytes) + callbackGasLimit):
    /// the operators' compute and the chain gas of their commits, reveals and the callback.
    function feeFor(bytes32 modelHash) public view returns (uint256) {
        (, uint64 gas,, uint32 outputBytes,) = registry.terms(modelHash);
        return _fee(gas, outputBytes);
    }

    function _fee(uint256 gas, uint256 outputBytes) internal view returns (uint256) {
        uint256 chainGas = uint256(committeeSize) * (OPERATOR_ROUND_GAS + 16 * outputBytes) + callbackGasLimit;
        return uint256(minFee) + uint256(feePerGas) * gas + uint256(operatorGasPrice) * chainGas;
    }


    /// Pays out what `claimable` says (each concrete oracle's `claim`).
    function _claim() internal {
        uint256 amount = _claimable[msg.sender];
        Operator storage op = _operators[msg.sender];
        amount += _earned(op);
        if (amount == 0) revert NothingToClaim(msg.sender);
        _claimable[msg.sender] = 0;
        if (op.earned > 1) op.earned = 1;
        emit Claimed(msg.sender, amount);
        _send(msg.sender, amount);
    }

    /// What an operator commits to: its output's CVM hash and the keccak256 of its output bytes (so
    /// the bytes that finalise are the ones committed, whoever submits the opening), its trace root,
    /// a salt and its own address (so nobody can copy another's commitment).
    function commitmentFor(
        uint256 requestId,
        bytes32 outputHash,
        bytes32 outputKeccak,
        bytes32 traceRoot,
        bytes32 salt,
        address operator
    ) public pure returns (bytes32) {
        return keccak256(abi.encode(requestId, outputHash, outputKeccak, traceRoot, salt, operator));
    }

    /// The fast path's threshold: `quorum` equal reveals, and more than half of the seats taken (seats
    /// are every drawn operator that committed, so a larger committee needs a larger majority).
    function _threshold(uint256 seats) internal view returns (uint256) {
        uint256 majority = seats / 2 + 1;
        return majority > quorum ? majority : quorum;
    }

    /// The bond each seat locks for a request on `modelHash`: at least `slashAmount`, and at least
    /// twice the model's worst-case dispute gas at `operatorGasPrice` (the winner of a dispute gets
    /// half of a slashed bond, which then covers its gas) (ModelRegistry.disputeGas).
    function bondFor(bytes32 modelHash) external view returns (uint128) {
        (,,,, uint64 disputeGas) = registry.terms(modelHash);
        return _bond(disputeGas);
    }

    function _bond(uint256 disputeGas) internal view returns (uint128) {
        uint256 bond = 2 * uint256(operatorGasPrice) * disputeGas;
        return bond > slashAmount ? uint128(bond) : slashAmount;
    }

    /// The window a plain `request` gets: the fast path (0) for a callback that holds no value, the
    /// longest window otherwise (a consumer that pays out on a result must not trust k colluders).
    function _defaultWindow(address callback) internal view returns (uint64) {
        return callback.code.length != 0 && callback.balance != 0 ? maxChallengeWindow : 0;
    }

    /// Gas that a reveal (or `finalize`) with `outputLength` output bytes needs when it finalises:
    /// its own work, PER_COMMITTER_GAS for each seat, the output's calldata, log and memory, and the
    /// callback's gas with the 1/64 the EVM withholds. The node sends reveals with this much.
    function revealGas(uint256 outputLength) public view returns (uint256) {
        uint256 words = (outputLength + 31) / 32 + 8;
        uint256 memoryGas = 3 * words + (words * words) / 512;
        return REVEAL_BASE_GAS + PER_COMMITTER_GAS * committeeSize + 40 * outputLength + 3 * memoryGas
            + (uint256(callbackGasLimit) * 64) / 63 + CALLBACK_GAS_RESERVE;
    }

    /// The draw's rule: an active operator staked before `requestBlock` holds a seat when
    /// keccak256(abi.encode(seed, operator)) mod totalStake < stake * n (InferenceOracle.isDrawn).
    function _drawn(bytes32 seed, uint256 requestBlock, uint256 stakeThen, address operator)
        internal
        view
        returns (bool)
    {
        Operator storage op = _operators[operator];
        uint256 w = _weight(op);
        if (w == 0 || op.stakedAt >= requestBlock || stakeThen == 0) return false;
        return uint256(keccak256(abi.encode(seed, operator))) % stakeThen < w * committeeSize;
    }

    /// The seed of a request made in `requestBlock`: the hash of that block, known once it is sealed.
    function _seed(uint256 requestId, uint256 requestBlock) internal view returns (bytes32) {
        if (block.number <= requestBlock) revert SeedNotReady(requestId);
        bytes32 h = blockhash(requestBlock);
        if (h == bytes32(0)) revert SeedUnavailable(requestId); // older than 256 blocks
        return keccak256(abi.encode(h, requestId));
    }

    /// One dispute per vote pair and pair of players (a game lost by a timeout may be played again
    /// by others over the same votes).
    function _disputeKey(bytes32 voteC, bytes32 voteD, address challenger, address defender)
        internal
        pure
        returns (bytes32)
    {
        (bytes32 lo, bytes32 hi) = voteC < voteD ? (voteC, voteD) : (voteD, voteC);
        return keccak256(abi.encode(lo, hi, challenger, defender));
    }

    /// An outside challenger's bond for one game (`key`: its _disputeKey), from an active operator's
    /// free stake: as many games at once as its free stake covers.
    function _lockChallengeBond(uint256 requestId, bytes32 key, uint128 bond) internal {
        if (!isOperator(msg.sender)) revert NotOperator(msg.sender);
        Operator storage op = _operators[msg.sender];
        if (op.stake - op.locked < bond) revert InsufficientFreeStake(op.stake - op.locked, bond);
        op.locked += bond;
        challengeBondOf[requestId][key] = bond;
    }

    /// When a game ends: an outside challenger that won it has its claim stand as a vote (`won`: the
    /// defender's side wrong, its own not); its bond is released either way (after any slash).
    function _endChallenge(uint256 requestId, bytes32 key, address challenger, bytes32 vote, bool won) internal {
        if (challengeBondOf[requestId][key] == 0) return; // not an outside challenge
        if (won) {
            if (_outsideWinners[requestId][vote].length == 0) _outsideVotes[requestId].push(vote);
            _outsideWinners[requestId][vote].push(challenger);
        }
        _releaseChallengeBond(requestId, key, challenger);
    }

    /// When its game ends (after any slash): the outside challenger's bond for it is free again.
    function _releaseChallengeBond(uint256 requestId, bytes32 key, address challenger) internal {
        uint128 bond = challengeBondOf[requestId][key];
        if (bond == 0) return;
        challengeBondOf[requestId][key] = 0;
        Operator storage op = _operators[challenger];
        op.locked = op.locked > bond ? op.locked - bond : 0;
    }

    /// The vote a claim stands for: keccak256(abi.encode(outputHash, outputKeccak, traceRoot)).
    function _voteOf(DisputeGame.Claim calldata c) internal pure returns (bytes32) {
        return keccak256(abi.encode(c.outputHash, c.outputKeccak, c.traceRoot));
    }

    /// Splits `amount` among `payees`, the remainder to the first.
    function _share(address[] storage payees, uint256 amount) internal {
        uint256 share = amount / payees.length;
        _credit(payees[0], amount - share * (payees.length - 1));
        for (uint256 i = 1; i < payees.length; i++) {
            _credit(payees[i], share);
        }
    }

    /// Takes the bond (or what is left of the stake) once per request and operator: half to `winner`
    /// when there is one, the rest to the treasury. A committer's bond stays locked until its round
    /// releases it.
    function _slashOnce(uint256 requestId, address operator, SlashReason reason, address winner, uint128 bond)
        internal
    {
        if (slashedIn[requestId][operator]) return;
        slashedIn[requestId][operator] = true;
        _takeStake(requestId, operator, reason, winner, bond);
    }

    /// The slash itself: the bond (or what is left of the stake) leaves the stake, half to `winner`
    /// when there is one, the rest to the treasury.
    function _takeStake(uint256 requestId, address operator, SlashReason reason, address winner, uint128 bond)
        internal
    {
        Operator storage op = _operators[operator];
        uint128 amount = op.stake < bond ? op.stake : bond;
        _setStake(op, op.stake - amount);
        if (op.locked > op.stake) op.locked = op.stake;
        uint256 reward = winner == address(0) ? 0 : amount / 2;
        if (reward != 0) _credit(winner, reward);
        _credit(treasury, amount - reward);
        emit Slashed(requestId, operator, amount, reason);
    }

    function _popcount(uint16 mask) internal pure returns (uint256 n) {
        for (; mask != 0; mask &= mask - 1) n++;
    }


    /// Calls the consumer with exactly `callbackGasLimit` gas and without copying its return data.
    /// The check comes after the call data is encoded, so its memory is paid already.
    function _callback(uint256 requestId, address target, bytes32 modelHash, bytes calldata output) internal {
        bytes memory data = abi.encodeCall(IInferenceConsumer.onInferenceResult, (requestId, modelHash, output));
        uint256 gasLimit = callbackGasLimit;
        uint256 needed = (gasLimit * 64) / 63 + CALLBACK_GAS_RESERVE;
        if (gasleft() < needed) revert InsufficientGasForCallback(gasleft(), needed);
        bool success;
        assembly ("memory-safe") {
            success := call(gasLimit, target, 0, add(data, 32), mload(data), 0, 0)
        }
        emit CallbackResult(requestId, success);
    }


    /// Credits a payout: to the operator's own slot when `account` has one (written anyway when its
    /// bond is released), else to `_claimable`.
    function _credit(address account, uint256 amount) internal {
        Operator storage op = _operators[account];
        if (op.earned != 0) op.earned += uint128(amount); // has a record (see Operator)
        else _claimable[account] += amount;
    }

    /// Takes the bond (or what is left of the stake): half to `winner` when there is one, the rest

    /// Drawable weight: the stake of an active operator (at least minStake, not leaving), else 0.
    function _weight(Operator storage op) internal view returns (uint256) {
        return op.stake >= minStake && op.unlockTime == 0 ? op.stake : 0;
    }

    function _setStake(Operator storage op, uint128 amount) internal {
        totalStake -= _weight(op);
        op.stake = amount;
        totalStake += _weight(op);
    }

    function _send(address to, uint256 amount) internal {
        (bool ok,) = payable(to).call{value: amount}("");
        if (!ok) revert TransferFailed(to, amount);
    }
}

contract InferenceOracle is OracleCore {
    struct Request {
        bytes32 modelHash;
        address requester;
        uint64 commitDeadline;
        uint8 commits;
        uint8 reveals;
        Status status;
        bool settled;
        address callback;
        uint64 revealDeadline;
        uint32 outputBytes; // the registered output size: a reveal of another length is refused
        uint128 fee;
        uint128 totalStake; // drawable stake when the request was made
        bytes32 inputHash; // keccak256(input): the first leaf of every trace
        uint64 requestBlock; // its blockhash seeds the draw
        uint64 challengeWindow; // seconds after the reveal deadline for disputes (0: fast path)
        uint8 openDisputes;
        bytes32 result; // the agreed vote, keccak256(abi.encode(outputHash, keccak256(output), traceRoot))
        bytes32 outputHash; // the agreed output hash
    }

    /// The stored request: five slots written by `request` (a sixth only with a challenge window),
    /// one at finalisation (the agreed vote is not stored: `agreedMask` points at its revealers). The reveal deadline
    /// is commitDeadline + revealWindow. Bit i of `bondedMask` / `revealedMask` / `slashedMask` is the
    /// i-th committer's bond locked / vote revealed / bond taken (no per-operator slot).
    struct Stored {
        bytes32 modelHash;
        bytes32 inputHash;
        address requester;
        uint40 commitDeadline;
        uint8 commits;
        Status status;
        bool settled;
        uint16 bondedMask;
        uint16 revealedMask;
        address callback;
        uint48 requestBlock;
        uint32 outputBytes;
        uint16 agreedMask; // set at finalisation: the seats whose vote is the result (paid)
        uint128 fee;
        uint128 totalStake;
        uint64 challengeWindow;
        uint8 openDisputes;
        uint16 slashedMask;
        uint128 bond; // 0: slashAmount (bondFor); written only when the model's dispute gas prices it higher
        bytes32 outputHash;
    }

    /// A submission as `getSubmission` shows it.
    struct Submission {
        bytes32 commitment;
        bytes32 vote; // zero until revealed
        bool slashed;
        bool bonded; // its slashAmount is locked in the operator's stake
    }

    mapping(uint256 => Stored) private _requests;
    /// A committer's commitment, overwritten by its vote when it reveals (revealedMask tells which):
    /// one slot per committer, rewritten rather than a second one filled.
    mapping(uint256 => mapping(address => bytes32)) private _words;
    mapping(uint256 => mapping(uint256 => address)) private _committers; // r.commits of them

    constructor(ModelRegistry registry_, Referee referee_, Config memory c) OracleCore(registry_, referee_, c) {}

    function claim() external nonReentrant {
        _claim();
    }

    // ---------------------------------------------------------------- requests

    function _request(bytes32 modelHash, bytes calldata input, address callback, uint64 window)
        internal
        override
        returns (uint256 requestId)
    {
        uint32 outputBytes;
        uint128 bond;
        (requestId, outputBytes, bond) = _admit(modelHash, input);
        Stored storage r = _requests[requestId];
        r.modelHash = modelHash;
        r.inputHash = keccak256(input);
        r.requester = msg.sender;
        r.commitDeadline = uint40(block.timestamp + commitWindow);
        r.status = Status.Pending;
        r.callback = callback;
        r.requestBlock = uint48(block.number);
        r.outputBytes = outputBytes;
        r.fee = uint128(msg.value);
        r.totalStake = uint128(totalStake);
        if (window != 0) r.challengeWindow = window;
        if (bond != slashAmount) r.bond = bond;
        _emitRequested(requestId, r, window, input);
    }

    function _emitRequested(uint256 requestId, Stored storage r, uint64 window, bytes calldata input) private {
        emit InferenceRequested(
            requestId, r.modelHash, r.requester, r.callback, r.fee, r.commitDeadline, uint64(_revealDeadline(r)),
            window, input
        );
    }

    /// The draw's seed: the hash of the request's block, known only once that block is sealed.
    function seedOf(uint256 requestId) public view returns (bytes32) {
        Stored storage r = _requests[requestId];
        if (block.number <= r.requestBlock) revert SeedNotReady(requestId);
        bytes32 h = blockhash(r.requestBlock);
        if (h == bytes32(0)) revert SeedUnavailable(requestId); // older than 256 blocks
        return keccak256(abi.encode(h, requestId));
    }

    /// Whether `operator` is drawn for the request: active, staked before the request's block, and
    /// keccak256(abi.encode(seed, operator)) mod totalStake < stake * n.
    function isDrawn(uint256 requestId, address operator) public view returns (bool) {
        Stored storage r = _requests[requestId];
        Operator storage op = _operators[operator];
        uint256 w = _weight(op);
        if (w == 0 || op.stakedAt >= r.requestBlock || r.totalStake == 0) return false;
        uint256 ticket = uint256(keccak256(abi.encode(seedOf(requestId), operator))) % r.totalStake;
        return ticket < w * committeeSize;
    }

    function commit(uint256 requestId, bytes32 commitment) external {
        Stored storage r = _pending(requestId);
        if (block.timestamp > r.commitDeadline) revert CommitPhaseOver(requestId);
        uint8 index = r.commits;
        if (index >= MAX_COMMITTEE) revert CommitteeFull(requestId);
        if (commitment == bytes32(0)) revert EmptyCommitment();
        if (_words[requestId][msg.sender] != bytes32(0)) revert AlreadyCommitted(requestId, msg.sender);
        if (!isOperator(msg.sender)) revert NotOperator(msg.sender);
        if (!isDrawn(requestId, msg.sender)) revert NotDrawn(requestId, msg.sender);
        Operator storage op = _operators[msg.sender];
        uint128 bond = _bondOf(r);
        if (op.stake - op.locked < bond) revert InsufficientFreeStake(op.stake - op.locked, bond);

        op.locked += bond;
        _words[requestId][msg.sender] = commitment;
        _committers[requestId][index] = msg.sender;
        r.commits = index + 1;
        r.bondedMask |= uint16(1 << index);
        emit Committed(requestId, msg.sender);
    }

    /// Reveals a commitment. Allowed after finalisation too (until the reveal deadline); an
    /// agreeing late reveal gets its bond back and no fee.
    function reveal(uint256 requestId, bytes32 outputHash, bytes32 traceRoot, bytes32 salt, bytes calldata output)
        external
        nonReentrant
    {
        Stored storage r = _requests[requestId];
        bytes32 commitment = _words[requestId][msg.sender];
        if (commitment == bytes32(0)) revert NotCommitted(requestId, msg.sender);
        uint256 index = _indexOf(requestId, r, msg.sender);
        uint16 bit = uint16(1 << index);
        if (r.revealedMask & bit != 0) revert AlreadyRevealed(requestId, msg.sender);
        if (r.status == Status.Expired) revert RequestNotPending(requestId);
        if (!revealOpen(requestId)) revert RevealPhaseNotOpen(requestId);
        if (block.timestamp > _revealDeadline(r)) revert RevealPhaseOver(requestId);
        if (output.length != r.outputBytes) revert WrongOutputLength(output.length, r.outputBytes);
        bytes32 outputKeccak = keccak256(output);
        if (commitmentFor(requestId, outputHash, outputKeccak, traceRoot, salt, msg.sender) != commitment) {
            revert CommitmentMismatch(requestId, msg.sender);
        }

        bytes32 vote = keccak256(abi.encode(outputHash, outputKeccak, traceRoot));
        _words[requestId][msg.sender] = vote;
        r.revealedMask |= bit;
        emit Revealed(requestId, msg.sender, outputHash, outputKeccak, traceRoot);

        // Only the fast path finalises here; a late reveal of the result gets its bond back.
        if (r.status == Status.Finalized) {
            if (vote == _result(requestId, r)) _release(r, index, msg.sender);
        } else if (r.challengeWindow == 0 && votes(requestId, vote) == _threshold(r.commits)
            && !refuted[requestId][vote]) {
            _finalize(requestId, r, vote, outputHash, output);
        }
    }

    /// After the challenge window (window > 0 only): finalises with the one vote that no dispute
    /// refuted; anyone may call it with that vote's output.
    function finalize(uint256 requestId, bytes32 outputHash, bytes32 traceRoot, bytes calldata output)
        external
        nonReentrant
    {
        Stored storage r = _pending(requestId);
        _checkClosable(requestId, r);
        bytes32 vote = keccak256(abi.encode(outputHash, keccak256(output), traceRoot));
        if (r.challengeWindow == 0 || _survivor(requestId, r) != vote || vote == bytes32(0)) {
            revert NoUniqueResult(requestId);
        }
        r.settled = true;
        _closeBonds(requestId, r);
        _finalize(requestId, r, vote, outputHash, output);
    }

    /// After the reveal deadline and challenge window, with no dispute open: expires an unfinalised
    /// request (refunding its fee), slashes every committer that did not reveal, and releases the
    /// other bonds. Anyone may call it, once per request.
    function settle(uint256 requestId) external nonReentrant {
        Stored storage r = _requests[requestId];
        if (r.status == Status.None) revert UnknownRequest(requestId);
        if (r.settled) revert AlreadySettled(requestId);
        _checkClosable(requestId, r);
        if (r.status == Status.Pending && r.challengeWindow != 0 && _survivor(requestId, r) != bytes32(0)) {
            revert ResultAwaitsFinalize(requestId);
        }
        r.settled = true;
        if (r.status == Status.Pending) {
            r.status = Status.Expired;
            _credit(r.requester, r.fee);
            emit Expired(requestId);
        }
        _closeBonds(requestId, r);
    }


    // ---------------------------------------------------------------- disputes

    /// A revealer disputes another revealer's different vote, until the reveal deadline plus the
    /// request's challenge window. The game bisects the two traces and re-executes one step.
    function openDispute(uint256 requestId, address defender, DisputeGame.Claim calldata mine, DisputeGame.Claim calldata theirs)
        external
        returns (uint256 disputeId)
    {
        return _startDispute(requestId, defender, _claimedVote(requestId, msg.sender, mine), mine, theirs);
    }

    /// The optimistic path (BatchedOracle.challenge): an active staked operator without a seat
    /// challenges a revealed vote by locking a bond and claiming its own output and trace.
    function challenge(uint256 requestId, address defender, DisputeGame.Claim calldata mine,
        DisputeGame.Claim calldata theirs) external nonReentrant returns (uint256 disputeId) {
        if (_words[requestId][msg.sender] != bytes32(0)) revert SeatedOperator(requestId, msg.sender);
        bytes32 voteC = _voteOf(mine);
        bytes32 key = _disputeKey(voteC, _claimedVote(requestId, defender, theirs), msg.sender, defender);
        _lockChallengeBond(requestId, key, _bondOf(_requests[requestId]));
        disputeId = _startDispute(requestId, defender, voteC, mine, theirs);
        _outsiders[requestId][voteC].push(msg.sender);
    }

    function _startDispute(uint256 requestId, address defender, bytes32 voteC, DisputeGame.Claim calldata mine,
        DisputeGame.Claim calldata theirs) private returns (uint256 disputeId) {
        Stored storage r = _requests[requestId];
        if (r.status == Status.None || r.status == Status.Expired) revert RequestNotPending(requestId);
        if (block.timestamp > _revealDeadline(r) + r.challengeWindow) revert DisputeWindowOver(requestId);
        bytes32 voteD = _claimedVote(requestId, defender, theirs);
        if (voteC == voteD) revert SameVote();
        if (refuted[requestId][voteC]) revert VoteAlreadyRefuted(voteC);
        if (refuted[requestId][voteD]) revert VoteAlreadyRefuted(voteD);
        bytes32 key = _disputeKey(voteC, voteD, msg.sender, defender);
        if (disputed[requestId][key]) revert AlreadyDisputed(requestId);
        disputed[requestId][key] = true;
        r.openDisputes += 1;
        disputeId = disputeGame.start(
            DisputeGame.Start(requestId, r.modelHash, r.inputHash, msg.sender, defender, voteC, voteD, mine, theirs)
        );
        emit DisputeOpened(requestId, disputeId, msg.sender, defender);
    }

    /// The game's verdict (BatchedOracle.resolveDispute): a proven one refutes each wrong vote and
    /// slashes all its voters, half to the winner; a timeout slashes the player that missed its move
    /// and refutes its vote only once none of the vote's voters is left unslashed.
    function resolveDispute(uint256 requestId, address challenger, address defender, bytes32 voteC, bytes32 voteD,
        bool challengerWrong, bool defenderWrong, bool proven) external {
        if (msg.sender != address(disputeGame)) revert NotDisputeGame(msg.sender);
        Stored storage r = _requests[requestId];
        r.openDisputes -= 1;
        bytes32 key = _disputeKey(voteC, voteD, challenger, defender);
        if (proven) {
            if (challengerWrong) _refute(requestId, r, voteC, defenderWrong ? address(0) : defender);
            if (defenderWrong) _refute(requestId, r, voteD, challengerWrong ? address(0) : challenger);
        } else {
            disputed[requestId][key] = false;
            if (challengerWrong) _forfeit(requestId, r, challenger, voteC, defenderWrong ? address(0) : defender);
            if (defenderWrong) _forfeit(requestId, r, defender, voteD, challengerWrong ? address(0) : challenger);
        }
        _endChallenge(requestId, key, challenger, voteC, defenderWrong && !challengerWrong);
    }

    // ---------------------------------------------------------------- views


    function revealOpen(uint256 requestId) public view returns (bool) {
        Stored storage r = _requests[requestId];
        return r.status != Status.None && block.timestamp > r.commitDeadline; // seats are drawn until then
    }


    function statusOf(uint256 requestId) external view returns (Status) {
        return _requests[requestId].status;
    }

    function requesterOf(uint256 requestId) external view override returns (address) {
        return _requests[requestId].requester;
    }

    /// The fee refunded to the requester of an expired request (zero otherwise; BatchedOracle has it too).
    function refundOf(uint256 requestId) external view returns (uint256) {
        Stored storage r = _requests[requestId];
        return r.status == Status.Expired ? r.fee : 0;
    }

    function getRequest(uint256 requestId) external view returns (Request memory v) {
        Stored storage r = _requests[requestId];
        v.modelHash = r.modelHash;
        v.requester = r.requester;
        v.commitDeadline = r.commitDeadline;
        v.commits = r.commits;
        v.reveals = uint8(_popcount(r.revealedMask));
        v.status = r.status;
        v.settled = r.settled;
        v.callback = r.callback;
        v.revealDeadline = r.status == Status.None ? 0 : uint64(_revealDeadline(r));
        v.outputBytes = r.outputBytes;
        v.fee = r.fee;
        v.totalStake = r.totalStake;
        v.inputHash = r.inputHash;
        v.requestBlock = r.requestBlock;
        v.challengeWindow = r.challengeWindow;
        v.openDisputes = r.openDisputes;
        v.result = _result(requestId, r);
        v.outputHash = r.outputHash;
    }

    /// An operator's commitment (zero once revealed: its slot then holds the vote, and the
    /// `Revealed` event the opening), vote, and whether its bond is slashed or locked.
    function getSubmission(uint256 requestId, address operator) external view returns (Submission memory v) {
        bytes32 word = _words[requestId][operator];
        if (word == bytes32(0)) return v;
        Stored storage r = _requests[requestId];
        uint256 bit = 1 << _indexOf(requestId, r, operator);
        if (r.revealedMask & bit != 0) v.vote = word;
        else v.commitment = word;
        v.slashed = r.slashedMask & bit != 0;
        v.bonded = r.bondedMask & bit != 0;
    }

    /// How many committers revealed `vote`.
    function votes(uint256 requestId, bytes32 vote) public view returns (uint256 count) {
        Stored storage r = _requests[requestId];
        uint256 n = r.commits;
        for (uint256 i = 0; i < n; i++) {
            if (_voteAt(requestId, r, i) == vote && vote != bytes32(0)) count++;
        }
    }

    function committersOf(uint256 requestId) external view returns (address[] memory list) {
        uint256 n = _requests[requestId].commits;
        list = new address[](n);
        for (uint256 i = 0; i < n; i++) {
            list[i] = _committers[requestId][i];
        }
    }

    /// The one revealed vote that no dispute refuted, or zero when there is none or more than one.
    function survivorOf(uint256 requestId) external view returns (bytes32) {
        return _survivor(requestId, _requests[requestId]);
    }

    // ---------------------------------------------------------------- internals

    function _pending(uint256 requestId) private view returns (Stored storage r) {
        r = _requests[requestId];
        if (r.status == Status.None) revert UnknownRequest(requestId);
        if (r.status != Status.Pending) revert RequestNotPending(requestId);
    }

    function _bondOf(Stored storage r) private view returns (uint128) {
        uint128 bond = r.bond;
        return bond == 0 ? slashAmount : bond;
    }

    function _revealDeadline(Stored storage r) private view returns (uint256) {
        return uint256(r.commitDeadline) + revealWindow;
    }

    /// The vote of the i-th committer, zero until it reveals. The mask is read first: a committer
    /// that has not revealed costs no read of its slot.
    function _voteAt(uint256 requestId, Stored storage r, uint256 i) private view returns (bytes32) {
        if (r.revealedMask & (1 << i) == 0) return bytes32(0);
        return _words[requestId][_committers[requestId][i]];
    }

    /// A committer's seat: its bit in the request's masks.
    function _indexOf(uint256 requestId, Stored storage r, address operator) private view returns (uint256 i) {
        uint256 n = r.commits;
        while (i < n && _committers[requestId][i] != operator) i++;
        if (i == n) revert NotCommitted(requestId, operator);
    }

    function _checkClosable(uint256 requestId, Stored storage r) private view {
        uint256 deadline = _revealDeadline(r);
        if (block.timestamp <= deadline) revert RevealPhaseNotOver(requestId);
        if (block.timestamp <= deadline + r.challengeWindow) revert ChallengeWindowOpen(requestId);
        if (r.openDisputes != 0) revert DisputesOpen(requestId);
    }

    function _survivor(uint256 requestId, Stored storage r) private view returns (bytes32 found) {
        uint256 n = r.commits;
        bytes32[] storage outside = _outsideVotes[requestId];
        for (uint256 i = 0; i < n + outside.length; i++) {
            bytes32 v = i < n ? _voteAt(requestId, r, i) : outside[i - n];
            if (v == bytes32(0) || refuted[requestId][v]) continue;
            if (found != bytes32(0) && found != v) return bytes32(0);
            found = v;
        }
    }

    /// The agreed vote of a finalised request: the vote of its first paid revealer; zero before.
    function _result(uint256 requestId, Stored storage r) private view returns (bytes32) {
        uint256 mask = r.agreedMask;
        if (mask == 0) return bytes32(0);
        uint256 i = 0;
        while (mask & (1 << i) == 0) i++;
        return _voteAt(requestId, r, i);
    }

    function _claimedVote(uint256 requestId, address operator, DisputeGame.Claim calldata c) private view returns (bytes32 vote) {
        Stored storage r = _requests[requestId];
        uint256 n = r.commits;
        uint256 i = 0;
        while (i < n && _committers[requestId][i] != operator) i++;
        if (i < n) vote = _voteAt(requestId, r, i);
        if (vote == bytes32(0)) revert NotRevealed(requestId, operator);
        if (keccak256(abi.encode(c.outputHash, c.outputKeccak, c.traceRoot)) != vote) revert ClaimMismatch(operator);
    }

    /// Effects first (status, payouts, bonds), then the bounded callback. The fee pays the caller
    /// the callback's gas at operatorGasPrice, and the rest is split among the vote's revealers.
    function _finalize(uint256 requestId, Stored storage r, bytes32 vote, bytes32 outputHash, bytes calldata output)
        private
    {
        r.status = Status.Finalized;
        r.outputHash = outputHash;

        uint256 fee = r.fee;
        bool member = _words[requestId][msg.sender] != bytes32(0); // only a member is refunded the callback's gas
        uint256 callbackPay = member ? uint256(operatorGasPrice) * callbackGasLimit : 0;
        if (callbackPay > fee) callbackPay = fee;
        if (callbackPay != 0) _credit(msg.sender, callbackPay);
        if (votes(requestId, vote) == 0) _share(_outsideWinners[requestId][vote], fee - callbackPay);
        else _pay(requestId, r, vote, fee - callbackPay);
        emit Finalized(requestId, outputHash, output);

        if (r.callback != address(0)) _callback(requestId, r.callback, r.modelHash, output);
    }

    /// Splits `amount` among the vote's revealers (the remainder to the first) and frees their bonds.
    function _pay(uint256 requestId, Stored storage r, bytes32 vote, uint256 amount) private {
        uint256 payees = votes(requestId, vote);
        uint256 share = amount / payees;
        uint256 remainder = amount - share * payees;
        uint256 n = r.commits;
        uint16 agreed;
        for (uint256 i = 0; i < n; i++) {
            if (_voteAt(requestId, r, i) == vote) {
                address op = _committers[requestId][i];
                agreed |= uint16(1 << i);
                _release(r, i, op);
                _credit(op, share + remainder);
                remainder = 0;
            }
        }
        r.agreedMask = agreed;
    }

    /// At settle or finalize: committers that never revealed are slashed, the others' bonds released.
    function _closeBonds(uint256 requestId, Stored storage r) private {
        uint256 n = r.commits;
        for (uint256 i = 0; i < n; i++) {
            address op = _committers[requestId][i];
            if (r.revealedMask & (1 << i) == 0) {
                _slash(requestId, r, i, op, SlashReason.MissedReveal, address(0));
            } else {
                _release(r, i, op);
            }
        }
    }

    function _refute(uint256 requestId, Stored storage r, bytes32 vote, address winner) private {
        refuted[requestId][vote] = true;
        emit VoteRefuted(requestId, vote);
        uint256 n = r.commits;
        for (uint256 i = 0; i < n; i++) {
            if (_voteAt(requestId, r, i) == vote) {
                address op = _committers[requestId][i];
                _slash(requestId, r, i, op, SlashReason.WrongResult, winner);
            }
        }
        address[] storage outside = _outsiders[requestId][vote];
        for (uint256 i = 0; i < outside.length; i++) {
            _slashOnce(requestId, outside[i], SlashReason.WrongResult, winner, _bondOf(r));
        }
    }

    /// A player that missed a move is slashed alone. Its vote is refuted only when the committee
    /// revealed it and every such revealer is slashed: an outside claim (anyone's) is never refuted by
    /// its challenger's timeout, so nobody refutes an honest vote by claiming it and stopping.
    function _forfeit(uint256 requestId, Stored storage r, address player, bytes32 vote, address winner) private {
        uint256 n = r.commits;
        (uint256 voters, bool alive) = (0, false);
        for (uint256 i = 0; i < n; i++) {
            address op = _committers[requestId][i];
            if (op == player) _slash(requestId, r, i, op, SlashReason.MissedMove, winner);
            if (_voteAt(requestId, r, i) != vote) continue;
            voters++;
            if (r.slashedMask & (1 << i) == 0) alive = true;
        }
        if (_words[requestId][player] == bytes32(0)) _slashOnce(requestId, player, SlashReason.MissedMove, winner, _bondOf(r));
        if (voters == 0 || alive) return;
        refuted[requestId][vote] = true;
        emit VoteRefuted(requestId, vote);
    }

    function _release(Stored storage r, uint256 index, address operator) private {
        uint16 bit = uint16(1 << index);
        if (r.bondedMask & bit == 0) return;
        r.bondedMask &= ~bit;
        _operators[operator].locked -= _bondOf(r);
    }

    /// A seat's slash, once (its bit in slashedMask), after its bond is released (_takeStake).
    function _slash(uint256 requestId, Stored storage r, uint256 index, address operator, SlashReason reason,
        address winner) private {
        uint16 bit = uint16(1 << index);
        if (r.slashedMask & bit != 0) return;
        r.slashedMask |= bit;
        _release(r, index, operator);
        _takeStake(requestId, operator, reason, winner, _bondOf(r));
    }

}
