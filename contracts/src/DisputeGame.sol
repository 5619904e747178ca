// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ICVMTrace} from "./ICVM.sol";

interface IDisputeOracle {
    function resolveDispute(uint256 requestId, address challenger, address defender, bytes32 voteC, bytes32 voteD,
        bool challengerWrong, bool defenderWrong) external;
}

/// @title DisputeGame
/// @notice Settles a disagreement between two revealers of one oracle request, created by and
/// reporting to the InferenceOracle that deployed it. Each revealer committed to a trace root: the
/// Merkle root (keccak256(left ++ right), zero leaves up to a power of two) over the leaves of its
/// run, keccak256 of each tensor's wire bytes in graph order: leaf 0 is the request's input, leaf
/// i + 1 the output of node i.
///
/// Bisection: both parties post the two children of their current subtree root each round; the game
/// descends into the left child when the left children differ, else into the right one. After
/// `depth` rounds it holds the first leaf where the traces differ, every leaf before it agreed.
/// Step: anyone re-executes that one leaf: leaf 0 is keccak256(input), fixed at the request; a node
/// is run by the CVM trace precompile on its inputs, each proven against the agreed part of the
/// trace. A party whose leaf differs from the re-executed one loses. Two votes with the same trace
/// root differ in their output: the output leaf is proven and its output hash computed on chain.
/// A party that misses a move's deadline loses (both, when a step or output check is left undone).
///
/// This referee needs the CVM trace precompile (the embedded chain). On a chain without it, opening
/// a dispute reverts: a Solidity referee for one output element is not built yet.
contract DisputeGame {
    struct Claim {
        bytes32 outputHash;
        bytes32 outputKeccak;
        bytes32 traceRoot;
    }

    struct Start {
        uint256 requestId;
        bytes32 modelHash;
        bytes32 inputHash;
        address challenger;
        address defender;
        bytes32 voteC;
        bytes32 voteD;
        Claim claimC;
        Claim claimD;
    }

    enum Phase {
        None,
        Bisect,
        Step,
        Output,
        Resolved
    }

    struct Dispute {
        uint256 requestId;
        bytes32 modelHash;
        bytes32 inputHash;
        address challenger;
        uint64 deadline;
        Phase phase;
        uint8 level; // rounds of bisection left
        uint8 depth;
        bool movedC;
        bool movedD;
        address defender;
        uint32 index; // of the current subtree at its level; the leaf index once level is 0
        uint32 leafCount;
        uint32 outputLeaf;
        bytes32 voteC;
        bytes32 voteD;
        bytes32 rootC; // the challenger's trace root: the agreed leaves are proven against it
        bytes32 nodeC; // the parties' current subtree roots (their leaves once level is 0)
        bytes32 nodeD;
        bytes32 leftC;
        bytes32 rightC;
        bytes32 leftD;
        bytes32 rightD;
        Claim claimC;
        Claim claimD;
    }

    uint256 public constant MAX_DEPTH = 16; // 2^16 leaves: more than opset 2's 16,384 nodes and an input

    address public immutable oracle;
    uint64 public immutable moveTime;
    uint256 public disputeCount;
    mapping(uint256 => Dispute) private _disputes;

    event Bisected(uint256 indexed disputeId, uint8 level, uint32 index);
    event DisputeResolved(uint256 indexed disputeId, bool challengerWrong, bool defenderWrong);

    error NotOracle(address caller);
    error TraceTooDeep(uint256 leafCount);
    error WrongPhase(uint256 disputeId);
    error NotParty(address caller);
    error AlreadyMoved(address party);
    error ChildrenMismatch(address party);
    error MoveTimeOver(uint256 disputeId);
    error MoveTimeNotOver(uint256 disputeId);
    error BadProof(uint256 leaf);
    error BadProducer(uint256 producer, uint256 leaf);

    constructor(uint64 moveTime_) {
        oracle = msg.sender;
        moveTime = moveTime_;
    }

    /// The longest a dispute can last: every bisection round and the step at full time.
    function maxDuration() external view returns (uint256) {
        return (MAX_DEPTH + 1) * uint256(moveTime);
    }

    function start(Start calldata s) external returns (uint256 id) {
        if (msg.sender != oracle) revert NotOracle(msg.sender);
        (uint256 leafCount, uint256 outputLeaf) = ICVMTrace.traceInfo(s.modelHash);
        uint8 depth = 0;
        while ((uint256(1) << depth) < leafCount) depth++;
        if (depth > MAX_DEPTH) revert TraceTooDeep(leafCount);
        id = ++disputeCount;
        Dispute storage d = _disputes[id];
        (d.requestId, d.modelHash, d.inputHash) = (s.requestId, s.modelHash, s.inputHash);
        (d.challenger, d.defender, d.voteC, d.voteD) = (s.challenger, s.defender, s.voteC, s.voteD);
        (d.leafCount, d.outputLeaf, d.depth, d.level) = (uint32(leafCount), uint32(outputLeaf), depth, depth);
        (d.nodeC, d.nodeD, d.rootC) = (s.claimC.traceRoot, s.claimD.traceRoot, s.claimC.traceRoot);
        d.deadline = uint64(block.timestamp) + moveTime;
        if (d.nodeC == d.nodeD) {
            (d.claimC, d.claimD) = (s.claimC, s.claimD);
            d.phase = Phase.Output;
        } else {
            d.phase = depth == 0 ? Phase.Step : Phase.Bisect;
        }
    }

    /// One party's move: the two children of its current subtree root.
    function bisect(uint256 id, bytes32 left, bytes32 right) external {
        Dispute storage d = _live(id, Phase.Bisect);
        bool isC = msg.sender == d.challenger;
        if (!isC && msg.sender != d.defender) revert NotParty(msg.sender);
        if (isC ? d.movedC : d.movedD) revert AlreadyMoved(msg.sender);
        if (keccak256(abi.encodePacked(left, right)) != (isC ? d.nodeC : d.nodeD)) revert ChildrenMismatch(msg.sender);
        if (isC) (d.leftC, d.rightC, d.movedC) = (left, right, true);
        else (d.leftD, d.rightD, d.movedD) = (left, right, true);
        if (!(d.movedC && d.movedD)) return;

        bool goLeft = d.leftC != d.leftD;
        (d.nodeC, d.nodeD) = goLeft ? (d.leftC, d.leftD) : (d.rightC, d.rightD);
        d.index = d.index * 2 + (goLeft ? 0 : 1);
        d.level -= 1;
        (d.movedC, d.movedD) = (false, false);
        d.deadline = uint64(block.timestamp) + moveTime;
        if (d.level == 0) d.phase = Phase.Step;
        emit Bisected(id, d.level, d.index);
    }

    /// Re-executes the first differing leaf. `inputs`: the node's distinct non-constant input tensors
    /// (wire bytes, back to back); `proofs[j]`: the Merkle proof of the j-th one's leaf.
    function resolveStep(uint256 id, bytes calldata inputs, bytes32[][] calldata proofs) external {
        Dispute storage d = _live(id, Phase.Step);
        bytes32 correct;
        if (d.index >= d.leafCount) {
            correct = bytes32(0); // padding
        } else if (d.index == 0) {
            correct = d.inputHash;
        } else {
            (bytes32 out, uint256[] memory producers, bytes32[] memory leaves) =
                ICVMTrace.step(d.modelHash, d.index, inputs);
            if (proofs.length != producers.length) revert BadProof(d.index);
            for (uint256 j = 0; j < producers.length; j++) {
                if (producers[j] >= d.index) revert BadProducer(producers[j], d.index);
                if (!verify(d.rootC, leaves[j], producers[j], proofs[j], d.depth)) revert BadProof(producers[j]);
            }
            correct = out;
        }
        _finish(id, d, d.nodeC != correct, d.nodeD != correct);
    }

    /// Same trace root, different votes: proves the output leaf and computes the output hash.
    function resolveOutput(uint256 id, bytes calldata output, bytes32[] calldata proof) external {
        Dispute storage d = _live(id, Phase.Output);
        bytes32 leaf = keccak256(output);
        if (!verify(d.nodeC, leaf, d.outputLeaf, proof, d.depth)) revert BadProof(d.outputLeaf);
        bytes32 h = ICVMTrace.outputHash(d.modelHash, output);
        _finish(id, d, d.claimC.outputKeccak != leaf || d.claimC.outputHash != h,
            d.claimD.outputKeccak != leaf || d.claimD.outputHash != h);
    }

    /// After a move's deadline: a party that did not move loses; an undone step or output check
    /// loses for both.
    function timeout(uint256 id) external {
        Dispute storage d = _disputes[id];
        if (d.phase == Phase.None || d.phase == Phase.Resolved) revert WrongPhase(id);
        if (block.timestamp <= d.deadline) revert MoveTimeNotOver(id);
        bool bisecting = d.phase == Phase.Bisect;
        _finish(id, d, !bisecting || !d.movedC, !bisecting || !d.movedD);
    }

    function getDispute(uint256 id) external view returns (Dispute memory) {
        return _disputes[id];
    }

    /// Whether `leaf` sits at `index` under `root` in a tree of `depth` levels.
    function verify(bytes32 root, bytes32 leaf, uint256 index, bytes32[] calldata proof, uint8 depth)
        public
        pure
        returns (bool)
    {
        if (proof.length != depth) return false;
        bytes32 h = leaf;
        for (uint256 i = 0; i < proof.length; i++) {
            h = (index >> i) & 1 == 0 ? keccak256(abi.encodePacked(h, proof[i])) : keccak256(abi.encodePacked(proof[i], h));
        }
        return h == root;
    }

    function _live(uint256 id, Phase phase) private view returns (Dispute storage d) {
        d = _disputes[id];
        if (d.phase != phase) revert WrongPhase(id);
        if (block.timestamp > d.deadline) revert MoveTimeOver(id);
    }

    function _finish(uint256 id, Dispute storage d, bool challengerWrong, bool defenderWrong) private {
        d.phase = Phase.Resolved;
        emit DisputeResolved(id, challengerWrong, defenderWrong);
        IDisputeOracle(oracle).resolveDispute(
            d.requestId, d.challenger, d.defender, d.voteC, d.voteD, challengerWrong, defenderWrong
        );
    }
}
