// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "./ModelRegistry.sol";
import {DisputeGame} from "./DisputeGame.sol";
import {Referee} from "./Referee.sol";
import {OracleCore} from "./InferenceOracle.sol";

/// @title BatchedOracle
/// @notice The oracle of InferenceOracle (same staking, draw, bonds, fees, commit-reveal rule and
/// dispute game) with a round that costs a fraction of the gas: storage holds one word per request,
/// the hash of its whole state (`Round`), which every call passes back as calldata; the committee's
/// commits are signed off chain and submitted together (`commitSigned`), and its reveals too
/// (`reveal` takes any number of openings of one output). Each change emits `RoundUpdated` with the
/// new state, so a client reads the latest one from the logs.
///
///   request ──▶ commitSigned (the k..n signed commits, one tx) ──▶ reveal (the openings, one tx:
///   finalises and calls back) ──▶ [settle: refund / slash whoever did not reveal]
///
/// Any member may still commit (`commit`) or reveal alone, and any member may submit others' signed
/// commits or openings (nobody outside the committee: `NotSeated`): an aggregator that drops a commit
/// or a reveal only costs that member one transaction of its own before the deadline. A commitment
/// binds the operator's address, salt and output bytes (OracleCore.commitmentFor), and no opening is
/// accepted before the commit deadline, so no one who sees openings can copy them into a commitment
/// of its own, and only the committed bytes can finalise.
contract BatchedOracle is OracleCore {
    /// A request's whole state. Storage holds keccak256(abi.encode(round)) with the status in its
    /// lowest byte (`_key`); a call with any other round reverts `StaleRound`.
    struct Round {
        bytes32 modelHash;
        bytes32 inputHash; // keccak256(input): the first leaf of every trace
        address requester;
        address callback;
        uint128 fee;
        uint128 totalStake; // drawable stake when the request was made
        uint128 bond; // locked per seat, taken per offence (bondFor: priced from the model's dispute gas)
        uint64 requestBlock; // its blockhash seeds the draw
        uint64 commitDeadline; // the reveal deadline is commitDeadline + revealWindow
        uint64 challengeWindow;
        uint32 outputBytes;
        Status status;
        bool settled;
        uint16 revealedMask; // bit i: committers[i] revealed (words[i] is then its vote)
        uint16 bondedMask; // bit i: committers[i]'s bond is locked
        uint16 agreedMask; // set at finalisation: the seats whose vote is the result (paid)
        address[] committers;
        bytes32[] words; // commitment, overwritten by the vote when revealed
    }

    /// An operator's EIP-712 signature over Commit(requestId, commitment); the signer commits.
    struct SignedCommit {
        bytes32 commitment;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// What opens one commitment (with the output that `reveal` carries once for all openings).
    struct Opening {
        address operator;
        bytes32 outputHash;
        bytes32 traceRoot;
        bytes32 salt;
    }

    struct Refund {
        address requester;
        uint128 fee;
    }

    /// A request's disputes, kept apart from its round: the game reports without the round.
    struct Disputes {
        uint8 open;
        uint8 opened;
        uint128 bond; // the round's bond, for slashing when the game reports (it passes no round)
    }

    bytes32 private constant COMMIT_TYPEHASH = keccak256("Commit(uint256 requestId,bytes32 commitment)");
    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("CVM BatchedOracle");
    bytes32 private constant VERSION_HASH = keccak256("1");
    /// secp256k1n / 2: a larger s is the other of a signature's two forms.
    /// A bit of the stored word's low byte (beside the status): a dispute was opened on the request, so
    /// the fast path must ask whether a vote was refuted (a read it skips otherwise).
    bytes32 private constant DISPUTED = bytes32(uint256(0x80));
    bytes32 private constant HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0;

    mapping(uint256 => bytes32) private _rounds;
    mapping(uint256 => Disputes) public disputesOf;
    /// The revealers of each disputed vote, recorded when the dispute opens: the game's verdict slashes them.
    mapping(uint256 => mapping(bytes32 => address[])) private _voters;
    mapping(uint256 => Refund) private _refunds; // expired requests: whose fee was credited back

    /// The request being called back, for `requesterOf` (the consumer's check) during its callback.
    uint256 private transient _callingBack;
    address private transient _callingBackRequester;

    /// The new round, packed (`_packed`): 188 bytes, then 20 per committer and 32 per word. Less than
    /// half of its ABI encoding, and log data costs 8 gas a byte.
    event RoundUpdated(uint256 indexed requestId, bytes round);

    error StaleRound(uint256 requestId);
    /// Only a seated member (or, for commitSigned, one of the signers) submits a round's commits and
    /// openings: nobody outside the committee can make an aggregated submission stale by going first.
    error NotSeated(uint256 requestId, address submitter);
    error BadSignature(uint256 index);


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
        Round memory r;
        (requestId, r.outputBytes, r.bond) = _admit(modelHash, input);
        r.modelHash = modelHash;
        r.inputHash = keccak256(input);
        r.requester = msg.sender;
        r.callback = callback;
        r.fee = uint128(msg.value);
        r.totalStake = uint128(totalStake);
        r.requestBlock = uint64(block.number);
        r.commitDeadline = uint64(block.timestamp + commitWindow);
        r.challengeWindow = window;
        r.status = Status.Pending;
        _store(requestId, r);
        _emitRequested(requestId, r, input);
    }

    function _emitRequested(uint256 requestId, Round memory r, bytes calldata input) private {
        emit InferenceRequested(requestId, r.modelHash, r.requester, r.callback, r.fee, r.commitDeadline,
            r.commitDeadline + revealWindow, r.challengeWindow, input);
    }

    // ---------------------------------------------------------------- commits

    /// Commits the sender alone (the fallback when no aggregator took its signed commit).
    function commit(uint256 requestId, Round calldata round, bytes32 commitment) external nonReentrant {
        Round memory r = _load(requestId, round);
        bytes32 seed = _seed(requestId, r.requestBlock);
        _grow(r, 1);
        _commit(requestId, r, seed, msg.sender, commitment);
        _store(requestId, r);
    }

    /// Commits every signer of `commits` (each an EIP-712 signature over Commit(requestId,
    /// commitment), `commitDigest`): the submitter is one of them or already seated; the signatures
    /// say who commits.
    function commitSigned(uint256 requestId, Round calldata round, SignedCommit[] calldata commits)
        external
        nonReentrant
    {
        Round memory r = _load(requestId, round);
        bytes32 seed = _seed(requestId, r.requestBlock);
        bool member = _isSeated(r, msg.sender);
        _grow(r, commits.length);
        for (uint256 i = 0; i < commits.length; i++) {
            SignedCommit calldata c = commits[i];
            if (uint256(c.s) > uint256(HALF_N)) revert BadSignature(i);
            address signer = ecrecover(commitDigest(requestId, c.commitment), c.v, c.r, c.s);
            if (signer == address(0)) revert BadSignature(i);
            _commit(requestId, r, seed, signer, c.commitment);
            if (signer == msg.sender) member = true;
        }
        if (!member) revert NotSeated(requestId, msg.sender);
        _store(requestId, r);
    }

    /// What an operator signs to commit: the EIP-712 digest of Commit(requestId, commitment) in
    /// this oracle's domain (name "CVM BatchedOracle", version "1", this chain, this contract).
    function commitDigest(uint256 requestId, bytes32 commitment) public view returns (bytes32) {
        bytes32 domain = keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
        return keccak256(abi.encodePacked("\x19\x01", domain, keccak256(abi.encode(COMMIT_TYPEHASH, requestId, commitment))));
    }

    /// Room for `more` committers: the seat count so far stays in `r.committers.length` minus the
    /// empty seats, which `_commit` fills in order.
    function _grow(Round memory r, uint256 more) private pure {
        uint256 n = r.committers.length;
        address[] memory cs = new address[](n + more);
        bytes32[] memory ws = new bytes32[](n + more);
        for (uint256 i = 0; i < n; i++) {
            cs[i] = r.committers[i];
            ws[i] = r.words[i];
        }
        // the new seats are trimmed back to the filled ones: arrays shrink in place
        assembly ("memory-safe") {
            mstore(cs, n)
            mstore(ws, n)
        }
        r.committers = cs;
        r.words = ws;
    }

    function _commit(uint256 requestId, Round memory r, bytes32 seed, address operator, bytes32 commitment) private {
        if (r.status != Status.Pending) revert RequestNotPending(requestId);
        if (block.timestamp > r.commitDeadline) revert CommitPhaseOver(requestId);
        uint256 index = r.committers.length;
        if (index >= MAX_COMMITTEE) revert CommitteeFull(requestId);
        if (commitment == bytes32(0)) revert EmptyCommitment();
        for (uint256 j = 0; j < index; j++) {
            if (r.committers[j] == operator) revert AlreadyCommitted(requestId, operator);
        }
        if (!isOperator(operator)) revert NotOperator(operator);
        if (!_drawn(seed, r.requestBlock, r.totalStake, operator)) revert NotDrawn(requestId, operator);
        Operator storage op = _operators[operator];
        if (op.stake - op.locked < r.bond) revert InsufficientFreeStake(op.stake - op.locked, r.bond);
        op.locked += r.bond;

        address[] memory cs = r.committers;
        bytes32[] memory ws = r.words;
        assembly ("memory-safe") {
            mstore(cs, add(index, 1)) // _grow left room for it
            mstore(ws, add(index, 1))
        }
        cs[index] = operator;
        ws[index] = commitment;
        r.bondedMask |= uint16(1 << index); // no Committed event: RoundUpdated lists the committers
    }

    // ---------------------------------------------------------------- reveals

    /// Opens any number of commitments of one output (the aggregator's batch, or one member alone);
    /// any seated member may submit openings, which the commitments authenticate. The first vote that reaches
    /// the quorum (window 0) finalises: the round's revealers of that vote share the fee, and the
    /// consumer is called back. After finalisation, an agreeing opening gets its bond back.
    function reveal(uint256 requestId, Round calldata round, Opening[] calldata openings, bytes calldata output)
        external
        nonReentrant
    {
        Round memory r = _load(requestId, round);
        if (!_isSeated(r, msg.sender)) revert NotSeated(requestId, msg.sender);
        if (r.status == Status.Expired) revert RequestNotPending(requestId);
        if (block.timestamp <= r.commitDeadline) revert RevealPhaseNotOpen(requestId); // seating is open
        if (block.timestamp > uint256(r.commitDeadline) + revealWindow) revert RevealPhaseOver(requestId);
        if (output.length != r.outputBytes) revert WrongOutputLength(output.length, r.outputBytes);
        bytes32 outputKeccak = keccak256(output);

        bytes32 result = r.status == Status.Finalized ? _result(r) : bytes32(0);
        bytes32 finalVote;
        bytes32 finalHash;
        for (uint256 o = 0; o < openings.length; o++) {
            (uint256 i, bytes32 vote) = _open(requestId, r, openings[o], outputKeccak);
            if (result != bytes32(0)) {
                if (vote == result) _release(r, i);
            } else if (finalVote == bytes32(0) && r.challengeWindow == 0 && _votes(r, vote) == _threshold(r.committers.length)
                && !_refutedAfterDispute(requestId, vote)) {
                (finalVote, finalHash) = (vote, openings[o].outputHash);
            }
        }
        if (finalVote == bytes32(0)) {
            _store(requestId, r);
        } else {
            _finalize(requestId, r, finalVote, finalHash, output);
        }
    }

    /// Checks one opening against its seat's commitment and records its vote.
    function _open(uint256 requestId, Round memory r, Opening calldata p, bytes32 outputKeccak)
        private
        returns (uint256 i, bytes32 vote)
    {
        i = _seat(requestId, r, p.operator);
        uint16 bit = uint16(1 << i);
        if (r.revealedMask & bit != 0) revert AlreadyRevealed(requestId, p.operator);
        if (commitmentFor(requestId, p.outputHash, outputKeccak, p.traceRoot, p.salt, p.operator) != r.words[i]) {
            revert CommitmentMismatch(requestId, p.operator);
        }
        vote = keccak256(abi.encode(p.outputHash, outputKeccak, p.traceRoot));
        r.words[i] = vote;
        r.revealedMask |= bit;
        emit Revealed(requestId, p.operator, p.outputHash, outputKeccak, p.traceRoot);
    }

    /// After the challenge window (window > 0 only): finalises with the one vote that no dispute
    /// refuted; anyone may call it with that vote's output.
    function finalize(uint256 requestId, Round calldata round, bytes32 outputHash, bytes32 traceRoot,
        bytes calldata output) external nonReentrant {
        Round memory r = _load(requestId, round);
        if (r.status != Status.Pending) revert RequestNotPending(requestId);
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
    function settle(uint256 requestId, Round calldata round) external nonReentrant {
        Round memory r = _load(requestId, round);
        if (r.settled) revert AlreadySettled(requestId);
        _checkClosable(requestId, r);
        if (r.status == Status.Pending && r.challengeWindow != 0 && _survivor(requestId, r) != bytes32(0)) {
            revert ResultAwaitsFinalize(requestId);
        }
        r.settled = true;
        if (r.status == Status.Pending) {
            r.status = Status.Expired;
            _refunds[requestId] = Refund(r.requester, r.fee);
            _credit(r.requester, r.fee);
            emit Expired(requestId);
        }
        _closeBonds(requestId, r);
        _store(requestId, r);
    }

    // ---------------------------------------------------------------- disputes

    /// A revealer disputes another revealer's different vote, until the reveal deadline plus the
    /// request's challenge window (InferenceOracle.openDispute, with the round as calldata).
    function openDispute(uint256 requestId, Round calldata round, address defender, DisputeGame.Claim calldata mine,
        DisputeGame.Claim calldata theirs) external returns (uint256 disputeId) {
        Round memory r = _load(requestId, round);
        bytes32 voteC = _claimedVote(requestId, r, msg.sender, mine);
        return _startDispute(requestId, r, defender, voteC, mine, theirs);
    }

    /// The optimistic path: any active staked operator without a seat in the request challenges a
    /// revealed vote until the reveal deadline plus the challenge window, by locking the round's bond
    /// and claiming its own output and trace (`mine`). Its vote then stands beside the committee's:
    /// if the game proves the defender's vote wrong, the challenger's can finalise (`finalize`) and
    /// earns the fee; if it proves the challenger's wrong, the challenger is slashed like a revealer.
    /// One bond per game: an operator may challenge several revealers at once.
    function challenge(uint256 requestId, Round calldata round, address defender, DisputeGame.Claim calldata mine,
        DisputeGame.Claim calldata theirs) external nonReentrant returns (uint256 disputeId) {
        Round memory r = _load(requestId, round);
        for (uint256 i = 0; i < r.committers.length; i++) {
            if (r.committers[i] == msg.sender) revert SeatedOperator(requestId, msg.sender);
        }
        bytes32 voteC = _voteOf(mine);
        _lockChallengeBond(requestId, _disputeKey(voteC, _claimedVote(requestId, r, defender, theirs), msg.sender,
            defender), r.bond);
        disputeId = _startDispute(requestId, r, defender, voteC, mine, theirs);
        _outsiders[requestId][voteC].push(msg.sender);
    }

    /// What both kinds of dispute share: the window, the votes' checks, the voters' record, the game.
    /// One dispute per (vote pair, challenger, defender): a game lost by a timeout leaves the votes
    /// to be disputed again by others (`resolveDispute`).
    function _startDispute(uint256 requestId, Round memory r, address defender, bytes32 voteC,
        DisputeGame.Claim calldata mine, DisputeGame.Claim calldata theirs) private returns (uint256 disputeId) {
        if (r.status == Status.Expired) revert RequestNotPending(requestId);
        if (block.timestamp > uint256(r.commitDeadline) + revealWindow + r.challengeWindow) {
            revert DisputeWindowOver(requestId);
        }
        bytes32 voteD = _claimedVote(requestId, r, defender, theirs);
        if (voteC == voteD) revert SameVote();
        if (refuted[requestId][voteC]) revert VoteAlreadyRefuted(voteC);
        if (refuted[requestId][voteD]) revert VoteAlreadyRefuted(voteD);
        bytes32 key = _disputeKey(voteC, voteD, msg.sender, defender);
        if (disputed[requestId][key]) revert AlreadyDisputed(requestId);
        disputed[requestId][key] = true;
        _rounds[requestId] |= DISPUTED;
        Disputes storage d = disputesOf[requestId];
        d.open += 1;
        d.opened = 1;
        d.bond = r.bond;
        _recordVoters(requestId, r, voteC);
        _recordVoters(requestId, r, voteD);
        disputeId = disputeGame.start(
            DisputeGame.Start(requestId, r.modelHash, r.inputHash, msg.sender, defender, voteC, voteD, mine, theirs)
        );
        emit DisputeOpened(requestId, disputeId, msg.sender, defender);
    }

    /// The game's verdict (the interface DisputeGame calls on every oracle). A verdict proven by
    /// re-execution refutes each wrong vote and slashes all its revealers (and challengers), half to
    /// the winner. A timeout proves nothing about a vote: the player that missed its move is slashed,
    /// and its vote is refuted only once none of its voters is left unslashed, so nobody can refute
    /// an honest vote by claiming it and then losing on purpose. An outside challenger's bond is
    /// released when its game ends.
    function resolveDispute(uint256 requestId, address challenger, address defender, bytes32 voteC, bytes32 voteD,
        bool challengerWrong, bool defenderWrong, bool proven) external {
        if (msg.sender != address(disputeGame)) revert NotDisputeGame(msg.sender);
        Disputes storage d = disputesOf[requestId];
        d.open -= 1;
        uint128 bond = d.bond;
        bytes32 key = _disputeKey(voteC, voteD, challenger, defender);
        if (proven) {
            if (challengerWrong) _refute(requestId, voteC, defenderWrong ? address(0) : defender, bond);
            if (defenderWrong) _refute(requestId, voteD, challengerWrong ? address(0) : challenger, bond);
        } else {
            disputed[requestId][key] = false;
            if (challengerWrong) _forfeit(requestId, challenger, voteC, defenderWrong ? address(0) : defender, bond);
            if (defenderWrong) _forfeit(requestId, defender, voteD, challengerWrong ? address(0) : challenger, bond);
        }
        _endChallenge(requestId, key, challenger, voteC, defenderWrong && !challengerWrong);
    }

    // ---------------------------------------------------------------- views

    function statusOf(uint256 requestId) external view returns (Status) {
        return Status(uint8(uint256(_rounds[requestId] & ~DISPUTED)));
    }

    /// The stored word of a request: keccak256(abi.encode(round)) with the status in the lowest byte.
    function roundKey(uint256 requestId) external view returns (bytes32) {
        return _rounds[requestId] & ~DISPUTED;
    }

    function keyOf(Round calldata round) external pure returns (bytes32) {
        return _key(round);
    }

    /// The fee refunded to the requester of an expired request (zero otherwise).
    function refundOf(uint256 requestId) external view returns (uint256) {
        return _refunds[requestId].fee;
    }

    /// Who made the request: known while its callback runs, and once it expired (no record is kept
    /// otherwise; the round has it).
    function requesterOf(uint256 requestId) external view override returns (address) {
        if (requestId != 0 && requestId == _callingBack) return _callingBackRequester;
        return _refunds[requestId].requester;
    }

    /// InferenceOracle.isDrawn for a round: may `operator` commit to it.
    function isDrawn(uint256 requestId, Round calldata round, address operator) external view returns (bool) {
        return _drawn(_seed(requestId, round.requestBlock), round.requestBlock, round.totalStake, operator);
    }

    // ---------------------------------------------------------------- internals

    function _key(Round memory r) private pure returns (bytes32) {
        return (keccak256(abi.encode(r)) & ~bytes32(uint256(0xff))) | bytes32(uint256(uint8(r.status)));
    }

    function _load(uint256 requestId, Round calldata round) private view returns (Round memory r) {
        bytes32 stored = _rounds[requestId] & ~DISPUTED;
        if (stored == bytes32(0)) revert UnknownRequest(requestId);
        r = round;
        if (_key(r) != stored) revert StaleRound(requestId);
    }

    function _store(uint256 requestId, Round memory r) private {
        _rounds[requestId] = _key(r) | (_rounds[requestId] & DISPUTED);
        emit RoundUpdated(requestId, _packed(r));
    }

    /// modelHash, inputHash (32 each), requester, callback (20), fee, totalStake, bond (16), requestBlock,
    /// commitDeadline, challengeWindow (8), outputBytes (4), status, settled (1), revealedMask,
    /// bondedMask, agreedMask (2), the committer count (1), then the committers (20 each) and the
    /// words (32 each); big-endian (cvm/chain/batch.py `unpack_round`).
    function _packed(Round memory r) private pure returns (bytes memory out) {
        out = abi.encodePacked(r.modelHash, r.inputHash, r.requester, r.callback, r.fee, r.totalStake, r.bond);
        out = abi.encodePacked(out, r.requestBlock, r.commitDeadline, r.challengeWindow, r.outputBytes,
            uint8(r.status), r.settled);
        uint256 n = r.committers.length;
        out = abi.encodePacked(out, r.revealedMask, r.bondedMask, r.agreedMask, uint8(n));
        for (uint256 i = 0; i < n; i++) {
            out = abi.encodePacked(out, r.committers[i]);
        }
        out = abi.encodePacked(out, r.words);
    }

    function _seat(uint256 requestId, Round memory r, address operator) private pure returns (uint256 i) {
        uint256 n = r.committers.length;
        while (i < n && r.committers[i] != operator) i++;
        if (i == n) revert NotCommitted(requestId, operator);
    }

    function _voteAt(Round memory r, uint256 i) private pure returns (bytes32) {
        return r.revealedMask & (1 << i) == 0 ? bytes32(0) : r.words[i];
    }

    function _votes(Round memory r, bytes32 vote) private pure returns (uint256 count) {
        for (uint256 i = 0; i < r.committers.length; i++) {
            if (vote != bytes32(0) && _voteAt(r, i) == vote) count++;
        }
    }

    /// The agreed vote of a finalised request: the vote of its first paid revealer.
    function _result(Round memory r) private pure returns (bytes32) {
        uint256 mask = r.agreedMask;
        if (mask == 0) return bytes32(0);
        uint256 i = 0;
        while (mask & (1 << i) == 0) i++;
        return r.words[i];
    }

    /// The one unrefuted vote among the committee's reveals and the outside challengers' claims, or
    /// zero when there is none or more than one.
    function _survivor(uint256 requestId, Round memory r) private view returns (bytes32 found) {
        bytes32[] storage outside = _outsideVotes[requestId];
        uint256 n = r.committers.length;
        for (uint256 i = 0; i < n + outside.length; i++) {
            bytes32 v = i < n ? _voteAt(r, i) : outside[i - n];
            if (v == bytes32(0) || refuted[requestId][v]) continue;
            if (found != bytes32(0) && found != v) return bytes32(0);
            found = v;
        }
    }

    function _checkClosable(uint256 requestId, Round memory r) private view {
        uint256 deadline = uint256(r.commitDeadline) + revealWindow;
        if (block.timestamp <= deadline) revert RevealPhaseNotOver(requestId);
        if (block.timestamp <= deadline + r.challengeWindow) revert ChallengeWindowOpen(requestId);
        if (disputesOf[requestId].open != 0) revert DisputesOpen(requestId);
    }

    function _claimedVote(uint256 requestId, Round memory r, address operator, DisputeGame.Claim calldata c)
        private
        pure
        returns (bytes32 vote)
    {
        uint256 n = r.committers.length;
        uint256 i = 0;
        while (i < n && r.committers[i] != operator) i++;
        if (i < n) vote = _voteAt(r, i);
        if (vote == bytes32(0)) revert NotRevealed(requestId, operator);
        if (keccak256(abi.encode(c.outputHash, c.outputKeccak, c.traceRoot)) != vote) revert ClaimMismatch(operator);
    }

    function _recordVoters(uint256 requestId, Round memory r, bytes32 vote) private {
        address[] storage list = _voters[requestId][vote];
        if (list.length != 0) return;
        for (uint256 i = 0; i < r.committers.length; i++) {
            if (_voteAt(r, i) == vote) list.push(r.committers[i]);
        }
    }

    /// Effects first (status, payouts, bonds, the stored round), then the bounded callback. The fee
    /// pays the caller the callback's gas at operatorGasPrice, the rest is split among the vote's
    /// revealers (the remainder to the first), whose bonds are released.
    function _finalize(uint256 requestId, Round memory r, bytes32 vote, bytes32 outputHash, bytes calldata output)
        private
    {
        r.status = Status.Finalized;
        uint256 fee = r.fee;
        uint256 callbackPay = _isSeated(r, msg.sender) ? uint256(operatorGasPrice) * callbackGasLimit : 0;
        if (callbackPay > fee) callbackPay = fee;
        if (callbackPay != 0) _credit(msg.sender, callbackPay); // only a member is refunded the callback's gas
        uint256 payees = _votes(r, vote);
        if (payees == 0) {
            _payChallengers(requestId, vote, fee - callbackPay);
        } else {
            uint256 share = (fee - callbackPay) / payees;
            uint256 remainder = (fee - callbackPay) - share * payees;
            for (uint256 i = 0; i < r.committers.length; i++) {
                if (_voteAt(r, i) != vote) continue;
                r.agreedMask |= uint16(1 << i);
                _release(r, i);
                _credit(r.committers[i], share + remainder);
                remainder = 0;
            }
        }
        _store(requestId, r);
        emit Finalized(requestId, outputHash, output);
        if (r.callback != address(0)) {
            (_callingBack, _callingBackRequester) = (requestId, r.requester);
            _callback(requestId, r.callback, r.modelHash, output);
            (_callingBack, _callingBackRequester) = (0, address(0));
        }
    }

    /// A result that only outside challengers voted for (the committee's votes all refuted): they share
    /// the fee (the vote's list holds only them: no committer revealed it).
    function _payChallengers(uint256 requestId, bytes32 vote, uint256 amount) private {
        _share(_outsideWinners[requestId][vote], amount);
    }

    function _refutedAfterDispute(uint256 requestId, bytes32 vote) private view returns (bool) {
        return _rounds[requestId] & DISPUTED != 0 && refuted[requestId][vote];
    }

    function _isSeated(Round memory r, address account) private pure returns (bool) {
        for (uint256 i = 0; i < r.committers.length; i++) {
            if (r.committers[i] == account) return true;
        }
        return false;
    }

    /// At settle or finalize: committers that never revealed are slashed, the others' bonds released;
    /// after a dispute, a revealer of a refuted vote whom the verdict did not reach is slashed too.
    function _closeBonds(uint256 requestId, Round memory r) private {
        bool disputedRound = disputesOf[requestId].opened != 0;
        for (uint256 i = 0; i < r.committers.length; i++) {
            address op = r.committers[i];
            _release(r, i);
            if (r.revealedMask & (1 << i) == 0) {
                _slashOnce(requestId, op, SlashReason.MissedReveal, address(0), r.bond);
            } else if (disputedRound && refuted[requestId][r.words[i]]) {
                _slashOnce(requestId, op, SlashReason.WrongResult, address(0), r.bond);
            }
        }
    }

    /// A proven wrong vote: all its revealers and outside claimers slashed, half to the winner.
    function _refute(uint256 requestId, bytes32 vote, address winner, uint128 bond) private {
        refuted[requestId][vote] = true;
        emit VoteRefuted(requestId, vote);
        address[] storage list = _voters[requestId][vote];
        for (uint256 i = 0; i < list.length; i++) {
            _slashOnce(requestId, list[i], SlashReason.WrongResult, winner, bond);
        }
        list = _outsiders[requestId][vote];
        for (uint256 i = 0; i < list.length; i++) {
            _slashOnce(requestId, list[i], SlashReason.WrongResult, winner, bond);
        }
    }

    /// A player that missed a move: slashed alone. Its vote is refuted only when committee members
    /// revealed it and all of them are slashed: an outside claim (anyone's) is never refuted by its
    /// challenger's timeout, so nobody refutes an honest vote by claiming it and stopping.
    function _forfeit(uint256 requestId, address player, bytes32 vote, address winner, uint128 bond) private {
        _slashOnce(requestId, player, SlashReason.MissedMove, winner, bond);
        address[] storage list = _voters[requestId][vote];
        if (list.length == 0) return;
        for (uint256 i = 0; i < list.length; i++) {
            if (!slashedIn[requestId][list[i]]) return;
        }
        refuted[requestId][vote] = true;
        emit VoteRefuted(requestId, vote);
    }

    /// Frees seat i's bond. A slash may have cut `locked` down to the stake: it never goes below zero.
    function _release(Round memory r, uint256 i) private {
        uint16 bit = uint16(1 << i);
        if (r.bondedMask & bit == 0) return;
        r.bondedMask &= ~bit;
        Operator storage op = _operators[r.committers[i]];
        uint128 locked = op.locked;
        op.locked = locked > r.bond ? locked - r.bond : 0;
    }
}
