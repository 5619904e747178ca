// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ICVMTrace} from "./ICVM.sol";
import {ModelRegistry} from "./ModelRegistry.sol";
import {Referee} from "./Referee.sol";
import {RefereeMerkle} from "./RefereeMerkle.sol";

interface IDisputeOracle {
    function registry() external view returns (ModelRegistry);

    /// `proven`: the verdict came from re-execution (a step, an element or the output); false when a
    /// player missed a move's deadline, which proves nothing about its vote.
    function resolveDispute(uint256 requestId, address challenger, address defender, bytes32 voteC, bytes32 voteD,
        bool challengerWrong, bool defenderWrong, bool proven) external;
}

/// @title DisputeGame
/// @notice Settles a disagreement between two revealers of one oracle request, created by and
/// reporting to the InferenceOracle that deployed it. Each revealer committed to a trace root: the
/// Merkle root (keccak256(left ++ right), zero leaves up to a power of two) over the leaves of its
/// run, each tensor's word root (RefereeMerkle) in graph order: leaves 0..k-1 are the model's k
/// inputs (slices of the request's input, spec section 11), leaf k + i the output of node i.
///
/// Bisection: both parties post the two children of their current subtree root each round; the game
/// descends into the left child when the left children differ, else into the right one. After
/// `depth` rounds it holds the first leaf where the traces differ, every leaf before it agreed.
/// Step: anyone re-executes that one leaf: an input leaf is the word root of its slice of the input
/// whose keccak256 the request fixed; a node is run by the CVM trace precompile on its inputs, each
/// proven against the agreed part of the trace. A party whose leaf differs from the re-executed one loses. Two votes
/// with the same trace root differ in their output: the output leaf is proven and its output hash
/// computed on chain. A party that misses a move's deadline loses (both, when a step or output
/// check is left undone).
///
/// Without the precompile (anvil, Ethereum) the game uses the model's referee commitment in the
/// registry (cvm/chain/model_commitment.py) and goes on inside the disputed node: anyone proves the
/// node's spec against it (`openNode`), the parties descend the node's output tensor's word tree,
/// WORD_LEVELS levels a round, down to one 32-byte word where they differ (`bisectWords`), and
/// anyone has the Solidity Referee recompute the first element of that word where the parties
/// differ, from input and constant words proven against the trace and the spec (`resolveElement`).
/// Both bisections together must fit the moves that `maxDuration` allows (trace depth +
/// ceil(word depth / WORD_LEVELS) <= MAX_DEPTH - 1). The referee has every op of opsets 1 and 2; a
/// model with a node past the moves or past the referee's gas budget
/// (model_commitment.MAX_REFEREE_GAS) gets no commitment, so no dispute about it starts here
/// (NoRefereeCommitment) and operators do not serve it (model_commitment.require_served): no step
/// can time out for want of a referee.
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
        Resolved,
        Inner, // bisecting the disputed tensor's words (referee)
        Element // one word left: the referee recomputes one element
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
        bool referee; // no trace precompile: the Solidity referee settles the step
        uint8 wlevel; // word-bisection rounds left
        uint8 wdepth;
        uint32 word; // of the current word subtree at its level; the word index once wlevel is 0
        bytes32 modelRoot; // the model's referee commitment
        bytes32 specHash; // keccak256(abi.encode(spec)) of the disputed node, once proven
    }

    uint256 public constant MAX_DEPTH = 16; // 2^16 leaves: more than opset 2's 16,384 nodes and an input
    uint256 public constant WORD_LEVELS = 5; // word-tree levels one Inner round descends (32 nodes per move)

    address public immutable oracle;
    Referee public immutable referee;
    uint64 public immutable moveTime;
    uint256 public disputeCount;
    mapping(uint256 => Dispute) private _disputes;

    event Bisected(uint256 indexed disputeId, uint8 level, uint32 index);
    event NodeOpened(uint256 indexed disputeId, uint32 leaf, uint8 wordDepth);
    event BisectedWord(uint256 indexed disputeId, uint8 level, uint32 word);
    event WordsPosted(uint256 indexed disputeId, address party, bytes32[] nodes);
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
    error NoRefereeCommitment(bytes32 modelHash);
    error BadInput(uint256 disputeId);
    error UseReferee(uint256 disputeId);
    error NotRefereed(uint256 disputeId);
    error BadSpec(uint256 disputeId);
    error TooDeepToReferee(uint256 disputeId, uint256 wordDepth);
    error WrongOpponentNodes(uint256 disputeId);

    /// `referee_`: the Solidity Referee, deployed once on its own (its code would push the oracles,
    /// which create this game, past EIP-3860's initcode limit).
    constructor(uint64 moveTime_, Referee referee_) {
        oracle = msg.sender;
        moveTime = moveTime_;
        referee = referee_;
    }

    /// The longest a dispute can last: every bisection round and the step at full time.
    function maxDuration() external view returns (uint256) {
        return (MAX_DEPTH + 1) * uint256(moveTime);
    }

    function start(Start calldata s) external returns (uint256 id) {
        if (msg.sender != oracle) revert NotOracle(msg.sender);
        ModelRegistry registry = IDisputeOracle(oracle).registry(); // s.modelHash: a listing id, its file by modelHashOf
        (bool precompiled, uint256 leafCount, uint256 outputLeaf) = _traceInfo(registry.modelHashOf(s.modelHash));
        bytes32 modelRoot;
        if (!precompiled) {
            ModelRegistry.RefereeCommitment memory c = registry.refereeCommitment(s.modelHash);
            if (c.root == bytes32(0)) revert NoRefereeCommitment(s.modelHash);
            (leafCount, outputLeaf, modelRoot) = (c.leafCount, c.outputLeaf, c.root);
        }
        uint8 depth = 0;
        while ((uint256(1) << depth) < leafCount) depth++;
        if (depth > MAX_DEPTH) revert TraceTooDeep(leafCount);
        id = ++disputeCount;
        Dispute storage d = _disputes[id];
        (d.requestId, d.modelHash, d.inputHash) = (s.requestId, s.modelHash, s.inputHash);
        (d.challenger, d.defender, d.voteC, d.voteD) = (s.challenger, s.defender, s.voteC, s.voteD);
        (d.leafCount, d.outputLeaf, d.depth, d.level) = (uint32(leafCount), uint32(outputLeaf), depth, depth);
        (d.nodeC, d.nodeD, d.rootC) = (s.claimC.traceRoot, s.claimD.traceRoot, s.claimC.traceRoot);
        (d.referee, d.modelRoot) = (!precompiled, modelRoot);
        d.deadline = uint64(block.timestamp) + moveTime;
        if (d.nodeC == d.nodeD) {
            (d.claimC, d.claimD) = (s.claimC, s.claimD);
            d.phase = Phase.Output;
        } else {
            d.phase = depth == 0 ? Phase.Step : Phase.Bisect;
        }
    }

    /// One party's move: the two children of its current subtree root of the trace.
    function bisect(uint256 id, bytes32 left, bytes32 right) external {
        Dispute storage d = _disputes[id];
        bool isC = _mover(id, d, Phase.Bisect);
        if (keccak256(abi.encodePacked(left, right)) != (isC ? d.nodeC : d.nodeD)) revert ChildrenMismatch(msg.sender);
        if (isC) (d.leftC, d.rightC, d.movedC) = (left, right, true);
        else (d.leftD, d.rightD, d.movedD) = (left, right, true);
        if (!(d.movedC && d.movedD)) return;

        bool goLeft = d.leftC != d.leftD;
        (d.nodeC, d.nodeD) = goLeft ? (d.leftC, d.leftD) : (d.rightC, d.rightD);
        (d.movedC, d.movedD) = (false, false);
        d.deadline = uint64(block.timestamp) + moveTime;
        d.index = d.index * 2 + (goLeft ? 0 : 1);
        d.level -= 1;
        if (d.level == 0) d.phase = Phase.Step;
        emit Bisected(id, d.level, d.index);
    }

    /// One party's move in the Inner phase: the 2^j nodes j levels below its current node of the
    /// disputed tensor's word tree, j = min(WORD_LEVELS, levels left), so a round descends j levels.
    /// The first mover's nodes are kept as their hash (and logged, WordsPosted); the second passes
    /// them as `theirs`, and the game descends into the first node where the two lists differ.
    function bisectWords(uint256 id, bytes32[] calldata mine, bytes32[] calldata theirs) external {
        Dispute storage d = _disputes[id];
        bool isC = _mover(id, d, Phase.Inner);
        uint256 j = d.wlevel < WORD_LEVELS ? d.wlevel : WORD_LEVELS;
        if (mine.length != (uint256(1) << j) || _fold(mine) != (isC ? d.nodeC : d.nodeD)) {
            revert ChildrenMismatch(msg.sender);
        }
        emit WordsPosted(id, msg.sender, mine);
        if (!(isC ? d.movedD : d.movedC)) {
            if (isC) (d.leftC, d.movedC) = (keccak256(abi.encodePacked(mine)), true);
            else (d.leftD, d.movedD) = (keccak256(abi.encodePacked(mine)), true);
            return;
        }
        if (keccak256(abi.encodePacked(theirs)) != (isC ? d.leftD : d.leftC)) revert WrongOpponentNodes(id);
        uint256 k = 0;
        while (mine[k] == theirs[k]) k++; // they differ somewhere: their folds are the two differing nodes
        (d.nodeC, d.nodeD) = isC ? (mine[k], theirs[k]) : (theirs[k], mine[k]);
        (d.movedC, d.movedD) = (false, false);
        d.deadline = uint64(block.timestamp) + moveTime;
        d.word = uint32((uint256(d.word) << j) + k);
        d.wlevel -= uint8(j);
        if (d.wlevel == 0) d.phase = Phase.Element;
        emit BisectedWord(id, d.wlevel, d.word);
    }

    /// Whether the caller may move now; true for the challenger.
    function _mover(uint256 id, Dispute storage d, Phase phase) private view returns (bool isC) {
        if (d.phase != phase) revert WrongPhase(id);
        if (block.timestamp > d.deadline) revert MoveTimeOver(id);
        isC = msg.sender == d.challenger;
        if (!isC && msg.sender != d.defender) revert NotParty(msg.sender);
        if (isC ? d.movedC : d.movedD) revert AlreadyMoved(msg.sender);
    }

    /// The root of a power-of-two list of nodes (keccak256(left ++ right) pairwise).
    function _fold(bytes32[] calldata nodes) private pure returns (bytes32) {
        bytes32[] memory level = nodes;
        for (uint256 n = level.length; n > 1; n >>= 1) {
            for (uint256 i = 0; i < n / 2; i++) level[i] = keccak256(abi.encodePacked(level[2 * i], level[2 * i + 1]));
        }
        return level[0];
    }

    /// Re-executes the first differing leaf. `inputs`: the node's distinct non-constant input tensors
    /// (wire bytes, back to back), or the request's whole input for an input leaf (leaves 0..k-1 of
    /// a model with k inputs); `proofs[j]`: the Merkle proof of the j-th one's leaf. Without the
    /// precompile a node's leaf goes to `openNode` instead.
    function resolveStep(uint256 id, bytes calldata inputs, bytes32[][] calldata proofs) external {
        Dispute storage d = _live(id, Phase.Step);
        bytes32 correct;
        ModelRegistry registry = IDisputeOracle(oracle).registry();
        ModelRegistry.TensorSpec[] memory extra;
        if (d.index < d.leafCount) extra = registry.extraInputs(d.modelHash);
        if (d.index >= d.leafCount) {
            correct = bytes32(0); // padding
        } else if (d.index <= extra.length) {
            if (keccak256(inputs) != d.inputHash) revert BadInput(id);
            correct = RefereeMerkle.wordRoot(_inputSlice(registry, inputs, extra, d.index));
        } else {
            if (d.referee) revert UseReferee(id);
            (bytes32 out, uint256[] memory producers, bytes32[] memory leaves) =
                ICVMTrace.step(registry.modelHashOf(d.modelHash), d.index, inputs);
            if (proofs.length != producers.length) revert BadProof(d.index);
            for (uint256 j = 0; j < producers.length; j++) {
                if (producers[j] >= d.index) revert BadProducer(producers[j], d.index);
                if (!verify(d.rootC, leaves[j], producers[j], proofs[j], d.depth)) revert BadProof(producers[j]);
            }
            correct = out;
        }
        _finish(id, d, d.nodeC != correct, d.nodeD != correct, true);
    }

    /// Referee, Step phase: proves the disputed node's spec against the model's referee commitment
    /// and starts the bisection of its output tensor's words.
    function openNode(uint256 id, Referee.NodeSpec calldata spec, bytes32[] calldata proof) external {
        Dispute storage d = _live(id, Phase.Step);
        if (!d.referee || d.index >= d.leafCount) revert NotRefereed(id); // an input leaf has a zero spec leaf
        bytes32 h = keccak256(abi.encode(spec));
        if (!verify(d.modelRoot, h, d.index, proof, d.depth)) revert BadSpec(id);
        uint8 wdepth = RefereeMerkle.depthFor(RefereeMerkle.wordCount(spec.outNumel * spec.outSize));
        if (uint256(d.depth) + (wdepth + WORD_LEVELS - 1) / WORD_LEVELS + 1 > MAX_DEPTH) {
            revert TooDeepToReferee(id, wdepth);
        }
        (d.specHash, d.wdepth, d.wlevel, d.word) = (h, wdepth, wdepth, 0);
        d.phase = wdepth == 0 ? Phase.Element : Phase.Inner;
        d.deadline = uint64(block.timestamp) + moveTime;
        emit NodeOpened(id, d.index, wdepth);
    }

    /// Referee, Element phase: the parties' words differ; the first element where they differ is
    /// recomputed by the Referee from `ops` (one per input position of the spec), each activation's
    /// word root proven by `leafProofs[k]` against the agreed part of the trace. Elements past the
    /// tensor's end are padding and must be zero.
    function resolveElement(
        uint256 id,
        Referee.NodeSpec calldata spec,
        Referee.Operand[] calldata ops,
        bytes32[][] calldata leafProofs
    ) external {
        Dispute storage d = _live(id, Phase.Element);
        if (keccak256(abi.encode(spec)) != d.specHash) revert BadSpec(id);
        uint256 size = spec.outSize;
        uint256 j = 0;
        while (RefereeMerkle.element(d.nodeC, j, size) == RefereeMerkle.element(d.nodeD, j, size)) j++;
        uint256 e = uint256(d.word) * (32 / size) + j;
        int256 correct = 0;
        if (e < spec.outNumel) {
            if (leafProofs.length != ops.length) revert BadProof(d.index);
            bytes32[] memory roots;
            (correct, roots) = referee.evaluate(spec, e, ops);
            for (uint256 k = 0; k < ops.length; k++) {
                uint256 producer = spec.act[k];
                if (producer == type(uint256).max || ops[k].idx.length == 0) continue;
                if (producer >= d.index) revert BadProducer(producer, d.index);
                if (!verify(d.rootC, roots[k], producer, leafProofs[k], d.depth)) revert BadProof(producer);
            }
        }
        _finish(id, d, RefereeMerkle.element(d.nodeC, j, size) != correct,
            RefereeMerkle.element(d.nodeD, j, size) != correct, true);
    }

    /// Same trace root, different votes: proves the output leaf and computes the output hash (by the
    /// precompile, or as keccak256(outputPrefix ++ output) from the referee commitment).
    function resolveOutput(uint256 id, bytes calldata output, bytes32[] calldata proof) external {
        Dispute storage d = _live(id, Phase.Output);
        if (!verify(d.nodeC, RefereeMerkle.wordRoot(output), d.outputLeaf, proof, d.depth)) revert BadProof(d.outputLeaf);
        bytes32 k = keccak256(output);
        bytes32 h = d.referee
            ? keccak256(abi.encodePacked(IDisputeOracle(oracle).registry().refereeCommitment(d.modelHash).outputPrefix, output))
            : ICVMTrace.outputHash(IDisputeOracle(oracle).registry().modelHashOf(d.modelHash), output);
        _finish(id, d, d.claimC.outputKeccak != k || d.claimC.outputHash != h,
            d.claimD.outputKeccak != k || d.claimD.outputHash != h, true);
    }

    /// After a move's deadline: a party that did not move loses; an undone step or output check
    /// loses for both.
    function timeout(uint256 id) external {
        Dispute storage d = _disputes[id];
        if (d.phase == Phase.None || d.phase == Phase.Resolved) revert WrongPhase(id);
        if (block.timestamp <= d.deadline) revert MoveTimeNotOver(id);
        bool bisecting = d.phase == Phase.Bisect || d.phase == Phase.Inner; // a party that moved keeps its bond
        _finish(id, d, !bisecting || !d.movedC, !bisecting || !d.movedD, false);
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

    /// Input `i` of a request's input: the inputs' wire bytes concatenated in model input order (spec
    /// section 11), the registered sizes of inputs 1.. (`extraInputs`) taken from the end, input 0
    /// what is left in front (the request's length is the registered `inputBytes`, their sum).
    function _inputSlice(ModelRegistry registry, bytes calldata input, ModelRegistry.TensorSpec[] memory extra,
        uint256 i) private pure returns (bytes calldata) {
        uint256 end = input.length;
        for (uint256 j = extra.length; j > i; j--) end -= registry.sampleBytes(extra[j - 1]);
        return input[i == 0 ? 0 : end - registry.sampleBytes(extra[i - 1]):end];
    }

    /// The trace precompile's (leafCount, outputLeaf), or precompiled = false where it is absent.
    function _traceInfo(bytes32 modelHash) private view returns (bool precompiled, uint256 leafCount, uint256 outputLeaf) {
        (bool ok, bytes memory ret) = ICVMTrace.TRACE_PRECOMPILE.staticcall(abi.encodePacked(uint8(0), modelHash));
        if (!ok || ret.length != 64) return (false, 0, 0);
        (leafCount, outputLeaf) = abi.decode(ret, (uint256, uint256));
        precompiled = true;
    }

    function _live(uint256 id, Phase phase) private view returns (Dispute storage d) {
        d = _disputes[id];
        if (d.phase != phase) revert WrongPhase(id);
        if (block.timestamp > d.deadline) revert MoveTimeOver(id);
    }

    function _finish(uint256 id, Dispute storage d, bool challengerWrong, bool defenderWrong, bool proven) private {
        d.phase = Phase.Resolved;
        emit DisputeResolved(id, challengerWrong, defenderWrong);
        IDisputeOracle(oracle).resolveDispute(
            d.requestId, d.challenger, d.defender, d.voteC, d.voteD, challengerWrong, defenderWrong, proven
        );
    }
}
