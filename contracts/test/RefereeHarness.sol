// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {Referee} from "../src/Referee.sol";

/// Test only: Referee's element computation (_compute, everything evaluate does after the proofs)
/// for many op instances in one eth_call, for the referee's differential test
/// (cvm/chain/referee_diff.py). On the embedded chain an evaluate call spends most of its time in
/// ABI coding and multiproofs; this pays them once per batch, so thousands of instances per op fit
/// in CI. Operands come without proofs: their words are trusted (the proofs are evaluate's, tested
/// on their own).
contract RefereeHarness is Referee {
    /// Instance k is specs[k] with operands ops[k]; its elements are es[start[k] .. start[k + 1])
    /// (start has one entry more than specs). A read of a word not given reverts (MissingWord).
    function computeAll(
        NodeSpec[] calldata specs,
        Operand[][] calldata ops,
        uint256[] calldata es,
        uint256[] calldata start
    ) external pure returns (int256[] memory values) {
        values = new int256[](es.length);
        for (uint256 k = 0; k < specs.length; k++) {
            Reader memory r = _reader(specs[k], ops[k]);
            for (uint256 i = start[k]; i < start[k + 1]; i++) {
                if (es[i] >= specs[k].outNumel) revert ElementOutOfRange(es[i]);
                values[i] = _compute(specs[k], es[i], r);
            }
        }
    }

    function _reader(NodeSpec calldata s, Operand[] calldata ops) private pure returns (Reader memory r) {
        if (ops.length != s.act.length) revert WrongOperandCount(ops.length, s.act.length);
        r = Reader(new uint256[][](ops.length), new bytes32[][](ops.length), s.size, new uint256[](ops.length));
        for (uint256 k = 0; k < ops.length; k++) (r.idx[k], r.words[k]) = (ops[k].idx, ops[k].words);
    }
}
