// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {RefereeMerkle} from "./RefereeMerkle.sol";

/// @title Referee
/// @notice Recomputes one output element of one CVM node in Solidity, for the dispute game on chains
/// without the CVM trace precompile. Integer semantics are docs/spec.md section 7's, computed in
/// int256 (every intermediate of a verified model fits int64, section 6, so nothing wraps):
/// requant's rounding shift is an arithmetic right shift (floor) after adding 2^(s-1), div rounds
/// halves toward plus infinity by floor division, max_pool2d and conv2d skip padding taps.
///
/// The node is described by a NodeSpec (cvm/chain/model_commitment.py), proven by the caller
/// against the model's referee commitment. Each input position comes as an Operand: the 32-byte
/// words of its tensor that hold the elements read, with a multiproof to the tensor's word root.
/// The roots of constants are checked here against the spec; the roots of activations are returned
/// for the caller to prove against the agreed part of the trace. A read of a word that is not
/// given reverts (MissingWord); cvm/chain/referee.py gives exactly the words read.
contract Referee {
    uint256 public constant NONE = 0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff; // NodeSpec.act of a constant input: type(uint256).max

    // op codes (cvm.chain.model_commitment.OPS)
    uint256 internal constant CONV2D = 1;
    uint256 internal constant DENSE = 2;
    uint256 internal constant ADD = 3;
    uint256 internal constant SUB = 4;
    uint256 internal constant MUL = 5;
    uint256 internal constant DIV = 6;
    uint256 internal constant RELU = 7;
    uint256 internal constant CLIP = 8;
    uint256 internal constant REQUANT = 9;
    uint256 internal constant LUT = 10;
    uint256 internal constant MAX_POOL2D = 11;
    uint256 internal constant RESHAPE = 12;

    struct NodeSpec {
        uint256 op;
        int256[] p; // the op's shapes and attributes (model_commitment._params)
        uint256[] act; // per input: the trace leaf of the activation, or NONE
        bytes32[] root; // per input: the constant's word root, or zero
        uint256[] size; // per input: element bytes (1, 2 or 4)
        uint256[] numel; // per input: elements of one sample
        uint256 outSize;
        uint256 outNumel;
    }

    struct Operand {
        uint256[] idx; // word indices, sorted, distinct
        bytes32[] words;
        bytes32[] proof; // RefereeMerkle.multiRoot
    }

    /// The operands' words copied to memory (cheaper to read than nested calldata), and a cursor
    /// per operand: reads mostly walk forward, so the next word is usually at or after it.
    struct Reader {
        uint256[][] idx;
        bytes32[][] words;
        uint256[] size;
        uint256[] hint;
    }

    error WrongOperandCount(uint256 given, uint256 expected);
    error BadConstant(uint256 position);
    error MissingWord(uint256 position, uint256 word);
    error UnknownOp(uint256 op);
    error ElementOutOfRange(uint256 element);
    error LutDomain(int256 value);

    /// Output element `e` of the node, and the word root of each operand that was given (zero for
    /// one given no words).
    function evaluate(NodeSpec calldata s, uint256 e, Operand[] calldata ops)
        external
        pure
        returns (int256 value, bytes32[] memory roots)
    {
        if (ops.length != s.act.length) revert WrongOperandCount(ops.length, s.act.length);
        if (e >= s.outNumel) revert ElementOutOfRange(e);
        roots = new bytes32[](ops.length);
        for (uint256 k = 0; k < ops.length; k++) {
            if (ops[k].idx.length == 0) continue;
            uint8 depth = RefereeMerkle.depthFor(RefereeMerkle.wordCount(s.numel[k] * s.size[k]));
            roots[k] = RefereeMerkle.multiRoot(ops[k].idx, ops[k].words, ops[k].proof, depth);
            if (s.act[k] == NONE && roots[k] != s.root[k]) revert BadConstant(k);
        }
        Reader memory r = Reader(new uint256[][](ops.length), new bytes32[][](ops.length), s.size, new uint256[](ops.length));
        for (uint256 k = 0; k < ops.length; k++) (r.idx[k], r.words[k]) = (ops[k].idx, ops[k].words);
        value = _compute(s, e, ops, r);
    }

    function _compute(NodeSpec calldata s, uint256 e, Operand[] calldata ops, Reader memory r)
        private
        pure
        returns (int256)
    {
        uint256 op = s.op;
        if (op == CONV2D) return _conv(s, e, ops, r);
        if (op == DENSE) return _dense(s, e, ops, r);
        if (op == MAX_POOL2D) return _maxPool(s, e, r);
        if (op >= ADD && op <= DIV) return _binary(s, e, r);
        int256 x = _at(r, 0, e);
        if (op == RELU) return x > 0 ? x : int256(0);
        if (op == RESHAPE) return x;
        if (op == CLIP) return _clip(x, s.p[0], s.p[1]);
        if (op == REQUANT) return _requant(s, e, r, x);
        if (op == LUT) return _lut(s, r, x);
        revert UnknownOp(op);
    }

    /// p = [shift, bits, M, stride, dim]: the multiplier of element e is m[(e / stride) % dim].
    function _requant(NodeSpec calldata s, uint256 e, Reader memory r, int256 x)
        private
        pure
        returns (int256)
    {
        uint256 mi = uint256(s.p[2]) == 1 ? 0 : (e / uint256(s.p[3])) % uint256(s.p[4]);
        return requant(x, _at(r, 1, mi), uint256(s.p[0]), uint256(s.p[1]));
    }

    /// y = t[x - offset] (spec 7.8). p = [offset].
    function _lut(NodeSpec calldata s, Reader memory r, int256 x) private pure returns (int256) {
        int256 ti = x - s.p[0];
        if (ti < 0 || uint256(ti) >= s.numel[1]) revert LutDomain(x);
        return _at(r, 1, uint256(ti));
    }

    /// clip(round_shift(x * m, s), -bits_max(p), bits_max(p)) (spec 7.7).
    function requant(int256 x, int256 m, uint256 s, uint256 bits) public pure returns (int256) {
        int256 v = x * m;
        if (s > 0) v = (v + (int256(1) << (s - 1))) >> s;
        int256 l = (int256(1) << (bits - 1)) - 1;
        return _clip(v, -l, l);
    }

    /// floor((2x + d) / (2d)) for d >= 1 (spec 7.9).
    function roundDiv(int256 x, int256 d) public pure returns (int256 q) {
        int256 n = 2 * x + d;
        int256 dd = 2 * d;
        q = n / dd;
        if (n % dd != 0 && n < 0) q -= 1;
    }

    function _clip(int256 v, int256 lo, int256 hi) private pure returns (int256) {
        return v < lo ? lo : (v > hi ? hi : v);
    }

    /// y[o, i, j] = b[o] + sum w[o, c, u, v] * x[gi*Cg + c, i*sh + u*dh - pt, j*sw + v*dw - pl],
    /// padding taps left out (spec 7.1). p = [C, H, W, O, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, g].
    function _conv(NodeSpec calldata s, uint256 e, Operand[] calldata ops, Reader memory r)
        private
        pure
        returns (int256 acc)
    {
        uint256[20] memory q; // p, then o, i, j, Cg, the first input channel of o's group
        for (uint256 k = 0; k < 15; k++) q[k] = uint256(s.p[k]);
        q[15] = e / (q[4] * q[5]);
        q[16] = (e % (q[4] * q[5])) / q[5];
        q[17] = e % q[5];
        q[18] = q[0] / q[14];
        q[19] = (q[15] / (q[3] / q[14])) * q[18];
        for (uint256 c = 0; c < q[18]; c++) {
            for (uint256 u = 0; u < q[6]; u++) {
                uint256 row = q[16] * q[8] + u * q[12];
                if (row < q[10] || row - q[10] >= q[1]) continue;
                acc += _convRow(r, q, c, u, row - q[10]);
            }
        }
        if (ops.length == 3) acc += _at(r, 2, q[15]);
    }

    /// The taps of one kernel row u of input channel c, reading input row `row`.
    function _convRow(
        Reader memory r,
        uint256[20] memory q,
        uint256 c,
        uint256 u,
        uint256 row
    ) private pure returns (int256 acc) {
        uint256 xb = ((q[19] + c) * q[1] + row) * q[2];
        uint256 wb = ((q[15] * q[18] + c) * q[6] + u) * q[7];
        for (uint256 v = 0; v < q[7]; v++) {
            uint256 col = q[17] * q[9] + v * q[13];
            if (col < q[11] || col - q[11] >= q[2]) continue;
            acc += _at(r, 0, xb + col - q[11]) * _at(r, 1, wb + v);
        }
    }

    /// y[..., o] = b[o] + sum_k x[..., k] * w[o, k] (spec 7.2). p = [K, O].
    function _dense(NodeSpec calldata s, uint256 e, Operand[] calldata ops, Reader memory r)
        private
        pure
        returns (int256 acc)
    {
        uint256 kk = uint256(s.p[0]);
        uint256 o = e % uint256(s.p[1]);
        uint256 xb = (e / uint256(s.p[1])) * kk;
        uint256 wb = o * kk;
        for (uint256 k = 0; k < kk; k++) acc += _at(r, 0, xb + k) * _at(r, 1, wb + k);
        if (ops.length == 3) acc += _at(r, 2, o);
    }

    /// max over the window's taps inside the input (spec 7.10).
    /// p = [C, H, W, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw].
    function _maxPool(NodeSpec calldata s, uint256 e, Reader memory r)
        private
        pure
        returns (int256 best)
    {
        uint256[16] memory q; // p, then c, i, j
        for (uint256 k = 0; k < 13; k++) q[k] = uint256(s.p[k]);
        q[13] = e / (q[3] * q[4]);
        q[14] = (e % (q[3] * q[4])) / q[4];
        q[15] = e % q[4];
        best = type(int256).min;
        for (uint256 u = 0; u < q[5]; u++) {
            uint256 row = q[14] * q[7] + u * q[11];
            if (row < q[9] || row - q[9] >= q[1]) continue;
            uint256 xb = (q[13] * q[1] + row - q[9]) * q[2];
            for (uint256 v = 0; v < q[6]; v++) {
                uint256 col = q[15] * q[8] + v * q[12];
                if (col < q[10] || col - q[10] >= q[2]) continue;
                int256 x = _at(r, 0, xb + col - q[10]);
                if (x > best) best = x;
            }
        }
    }

    /// add, sub, mul, div with numpy broadcasting (spec 7.4, 7.9). p = [r, out..., a..., b...], each
    /// operand's shape right-aligned to rank r with ones.
    function _binary(NodeSpec calldata s, uint256 e, Reader memory r)
        private
        pure
        returns (int256)
    {
        uint256 ia = _broadcast(s.p, e, 1);
        uint256 ib = _broadcast(s.p, e, 2);
        int256 a = _at(r, 0, ia);
        int256 b = _at(r, 1, ib);
        uint256 op = s.op;
        if (op == ADD) return a + b;
        if (op == SUB) return a - b;
        if (op == MUL) return a * b;
        return roundDiv(a, b);
    }

    /// The flat index in operand `which` (1 or 2: its dims at p[which * r + 1 ..]) of output element e.
    function _broadcast(int256[] calldata p, uint256 e, uint256 which) private pure returns (uint256 flat) {
        uint256 rank = uint256(p[0]);
        uint256 stride = 1;
        for (uint256 ax = rank; ax > 0; ax--) {
            uint256 dim = uint256(p[ax]);
            uint256 own = uint256(p[which * rank + ax]);
            if (own != 1) flat += (e % dim) * stride;
            e /= dim;
            stride *= own;
        }
    }

    /// Element k of operand `pos`.
    function _at(Reader memory r, uint256 pos, uint256 k) private pure returns (int256) {
        uint256 size = r.size[pos];
        uint256 off = k * size;
        uint256 w = off >> 5;
        uint256[] memory idx = r.idx[pos];
        uint256 h = r.hint[pos];
        if (h < idx.length && idx[h] == w) {
            // at the cursor
        } else if (h + 1 < idx.length && idx[h + 1] == w) {
            h += 1;
            r.hint[pos] = h;
        } else {
            uint256 lo = 0;
            uint256 hi = idx.length;
            while (lo < hi) {
                uint256 mid = (lo + hi) >> 1;
                if (idx[mid] < w) lo = mid + 1;
                else hi = mid;
            }
            if (lo == idx.length || idx[lo] != w) revert MissingWord(pos, w);
            h = lo;
            r.hint[pos] = h;
        }
        return RefereeMerkle.element(r.words[pos][h], (off & 31) / size, size);
    }
}
