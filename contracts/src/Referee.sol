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
    uint256 internal constant NONE = 0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff; // NodeSpec.act of a constant input: type(uint256).max

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
    uint256 internal constant RESHAPE = 12; // and flatten: the row-major elements kept
    uint256 internal constant MATMUL = 13;
    uint256 internal constant SUM = 14;
    uint256 internal constant MAX = 15;
    uint256 internal constant TRANSPOSE = 16; // and pad, slice: an affine index map per axis
    uint256 internal constant CONCAT = 17;
    uint256 internal constant RESIZE2D = 18;
    uint256 internal constant CONV_TRANSPOSE2D = 19;
    uint256 internal constant GATHER = 20;
    uint256 internal constant ISQRT = 21;

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
    error GatherIndex(int256 value);

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
        value = _compute(s, e, r);
    }

    /// One dispatch per op code (cvm/chain/referee_ops.py has the same table in Python). Internal, not
    /// private, for contracts/test/RefereeHarness.sol, the differential test's batch of elements.
    function _compute(NodeSpec calldata s, uint256 e, Reader memory r) internal pure returns (int256) {
        uint256 op = s.op;
        if (op == CONV2D) return _conv(s, e, r);
        if (op == DENSE) return _dense(s, e, r);
        if (op >= ADD && op <= DIV) return _binary(s, e, r);
        if (op == RELU) return _max0(_at(r, 0, e));
        if (op == CLIP) return _clip(_at(r, 0, e), s.p[0], s.p[1]);
        if (op == REQUANT) return _requant(s, e, r);
        if (op == LUT) return _lut(s, e, r);
        if (op == MAX_POOL2D) return _maxPool(s, e, r);
        if (op == RESHAPE) return _at(r, 0, e);
        if (op == MATMUL) return _matmul(s, e, r);
        if (op == SUM || op == MAX) return _reduce(s, e, r);
        if (op == TRANSPOSE) return _affine(s.p, e, r);
        if (op == CONCAT) return _concat(s.p, e, r);
        if (op == RESIZE2D) return _resize(s.p, e, r);
        if (op == CONV_TRANSPOSE2D) return _convTranspose(s, e, r);
        if (op == GATHER) return _gather(s.p, e, r);
        if (op == ISQRT) return int256(isqrt(uint256(_max0(_at(r, 0, e)))));
        revert UnknownOp(op);
    }

    function _max0(int256 x) private pure returns (int256) {
        return x > 0 ? x : int256(0);
    }

    /// p = [shift, bits, M, stride, dim]: the multiplier of element e is m[(e / stride) % dim].
    function _requant(NodeSpec calldata s, uint256 e, Reader memory r) private pure returns (int256) {
        uint256 mi = uint256(s.p[2]) == 1 ? 0 : (e / uint256(s.p[3])) % uint256(s.p[4]);
        return requant(_at(r, 0, e), _at(r, 1, mi), uint256(s.p[0]), uint256(s.p[1]));
    }

    /// y = t[x - offset] (spec 7.8). p = [offset].
    function _lut(NodeSpec calldata s, uint256 e, Reader memory r) private pure returns (int256) {
        int256 x = _at(r, 0, e);
        int256 ti = x - s.p[0];
        if (ti < 0 || uint256(ti) >= s.numel[1]) revert LutDomain(x);
        return _at(r, 1, uint256(ti));
    }

    /// clip(round_shift(x * m, s), -bits_max(p), bits_max(p)) (spec 7.7).
    function requant(int256 x, int256 m, uint256 s, uint256 bits) internal pure returns (int256) {
        int256 v = x * m;
        if (s > 0) v = (v + (int256(1) << (s - 1))) >> s;
        int256 l = (int256(1) << (bits - 1)) - 1;
        return _clip(v, -l, l);
    }

    /// floor((2x + d) / (2d)) for d >= 1 (spec 7.9).
    function roundDiv(int256 x, int256 d) internal pure returns (int256 q) {
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
    function _conv(NodeSpec calldata s, uint256 e, Reader memory r)
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
        if (s.act.length == 3) acc += _at(r, 2, q[15]);
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
    function _dense(NodeSpec calldata s, uint256 e, Reader memory r)
        private
        pure
        returns (int256 acc)
    {
        uint256 kk = uint256(s.p[0]);
        uint256 o = e % uint256(s.p[1]);
        uint256 xb = (e / uint256(s.p[1])) * kk;
        uint256 wb = o * kk;
        for (uint256 k = 0; k < kk; k++) acc += _at(r, 0, xb + k) * _at(r, 1, wb + k);
        if (s.act.length == 3) acc += _at(r, 2, o);
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

    /// y[b, m, n] = sum_k x[b, m, k] * y[b, k, n], leading axes flattened to b (spec 7.3).
    /// p = [M, K, N].
    function _matmul(NodeSpec calldata s, uint256 e, Reader memory r) private pure returns (int256 acc) {
        (uint256 m, uint256 kk, uint256 n) = (uint256(s.p[0]), uint256(s.p[1]), uint256(s.p[2]));
        uint256 b = e / (m * n);
        uint256 xb = (b * m + (e / n) % m) * kk;
        uint256 yb = b * kk * n + e % n;
        for (uint256 k = 0; k < kk; k++) acc += _at(r, 0, xb + k) * _at(r, 1, yb + k * n);
    }

    /// sum or max of x over the reduced axes (spec 7.11). p = [nk, kept dims, kept strides, nr,
    /// reduced dims, reduced strides]: e's coordinates on the kept axes (keepdims adds only ones)
    /// give the first input element; an odometer over the reduced axes walks the others.
    function _reduce(NodeSpec calldata s, uint256 e, Reader memory r) private pure returns (int256 acc) {
        int256[] calldata p = s.p;
        uint256 nk = uint256(p[0]);
        uint256 off = 0;
        for (uint256 a = nk; a > 0; a--) {
            uint256 d = uint256(p[a]);
            off += (e % d) * uint256(p[nk + a]);
            e /= d;
        }
        uint256 nr = uint256(p[2 * nk + 1]);
        uint256[] memory dim = new uint256[](nr);
        uint256[] memory stride = new uint256[](nr);
        uint256[] memory coord = new uint256[](nr);
        uint256 count = 1;
        for (uint256 a = 0; a < nr; a++) {
            (dim[a], stride[a]) = (uint256(p[2 * nk + 2 + a]), uint256(p[2 * nk + 2 + nr + a]));
            count *= dim[a];
        }
        bool isMax = s.op == MAX;
        if (isMax) acc = type(int256).min;
        for (uint256 t = 0; t < count; t++) {
            int256 x = _at(r, 0, off);
            if (!isMax) acc += x;
            else if (x > acc) acc = x;
            for (uint256 a = nr; a > 0; a--) { // the next reduced coordinate tuple
                uint256 i = a - 1;
                if (++coord[i] < dim[i]) {
                    off += stride[i];
                    break;
                }
                coord[i] = 0;
                off -= (dim[i] - 1) * stride[i];
            }
        }
    }

    /// transpose, pad and slice (spec 7.14, 7.16, 7.17): input axis a reads output coordinate src[a] as
    /// src * mul[a] + add[a]; outside the input the element is the pad value.
    /// p = [r, value, out dims, in dims, src, mul, add] (r each).
    function _affine(int256[] calldata p, uint256 e, Reader memory r) private pure returns (int256) {
        uint256 rank = uint256(p[0]);
        uint256[] memory o = new uint256[](rank);
        for (uint256 a = rank; a > 0; a--) {
            uint256 d = uint256(p[1 + a]);
            (o[a - 1], e) = (e % d, e / d);
        }
        uint256 flat = 0;
        for (uint256 a = 0; a < rank; a++) {
            int256 k = int256(o[uint256(p[2 + 2 * rank + a])]) * p[2 + 3 * rank + a] + p[2 + 4 * rank + a];
            int256 dim = p[2 + rank + a];
            if (k < 0 || k >= dim) return p[1];
            flat = flat * uint256(dim) + uint256(k);
        }
        return _at(r, 0, flat);
    }

    /// Inputs joined along an axis (spec 7.15). p = [inner (elements after the axis), the output's
    /// length on the axis, each input's length on it].
    function _concat(int256[] calldata p, uint256 e, Reader memory r) private pure returns (int256) {
        (uint256 inner, uint256 total) = (uint256(p[0]), uint256(p[1]));
        uint256 outer = e / (total * inner);
        uint256 c = (e / inner) % total;
        for (uint256 k = 2; k < p.length; k++) {
            uint256 len = uint256(p[k]);
            if (c < len) return _at(r, k - 2, (outer * len + c) * inner + e % inner);
            c -= len;
        }
        revert ElementOutOfRange(e);
    }

    /// resize2d (spec 14.1): nearest takes the source tap; linear weighs the 2 x 2 taps in units of
    /// 2^-k per axis, then round-shifts by 2k. p = [C, H, W, OH, OW, mode, ah, bh, dh, aw, bw, dw, k].
    function _resize(int256[] calldata p, uint256 e, Reader memory r) private pure returns (int256 y) {
        uint256 w = uint256(p[2]);
        uint256[4] memory ax = _axisTaps(p, 6, (e / uint256(p[4])) % uint256(p[3]), uint256(p[1]));
        uint256[4] memory bx = _axisTaps(p, 9, e % uint256(p[4]), w);
        uint256 base = (e / uint256(p[3] * p[4])) * uint256(p[1]) * w;
        if (p[5] == 0) return _at(r, 0, base + ax[0] * w + bx[0]);
        for (uint256 i = 0; i < 2; i++) {
            int256 row = int256(bx[2]) * _at(r, 0, base + ax[i] * w + bx[0])
                + int256(bx[3]) * _at(r, 0, base + ax[i] * w + bx[1]);
            y += int256(ax[2 + i]) * row;
        }
        uint256 k = uint256(p[12]);
        if (k > 0) y = (y + (int256(1) << (2 * k - 1))) >> (2 * k);
    }

    /// One axis of resize2d (cvm.ops.vision.axis_map), its (a, b, d) at p[first..]: [i0, i1, w0, w1] of
    /// output index i, with n = a*i + b, t = floor(n / d), i0 = clip(t), i1 = clip(t + 1),
    /// w1 = floor((r 2^(k+1) + d) / 2d), r = n - t*d; nearest: [i0, 0, 0, 0].
    function _axisTaps(int256[] calldata p, uint256 first, uint256 i, uint256 size)
        private
        pure
        returns (uint256[4] memory m)
    {
        (int256 d, uint256 k) = (p[first + 2], uint256(p[12]));
        int256 n = p[first] * int256(i) + p[first + 1];
        int256 t = n / d;
        if (n % d != 0 && n < 0) t -= 1;
        int256 top = int256(size) - 1;
        m[0] = uint256(_clip(t, 0, top));
        if (p[5] == 0) return m;
        m[1] = uint256(_clip(t + 1, 0, top));
        m[3] = uint256(((n - t * d) * (int256(1) << (k + 1)) + d) / (2 * d));
        m[2] = (uint256(1) << k) - m[3];
    }

    /// y[o, p, q] = b[o] + sum over c of o's group and (i, u), (j, v) with i*sh + u*dh - pt = p,
    /// j*sw + v*dw - pl = q of x[c, i, j] * w[c, o mod O/g, u, v] (spec 14.2).
    /// p = [C, H, W, O, OH, OW, KH, KW, sh, sw, pt, pl, dh, dw, g].
    function _convTranspose(NodeSpec calldata s, uint256 e, Reader memory r) private pure returns (int256 acc) {
        uint256[20] memory q; // p, then o, p, q, C/g, O/g
        for (uint256 k = 0; k < 15; k++) q[k] = uint256(s.p[k]);
        q[15] = e / (q[4] * q[5]);
        q[16] = (e % (q[4] * q[5])) / q[5];
        q[17] = e % q[5];
        q[18] = q[0] / q[14];
        q[19] = q[3] / q[14];
        uint256 c0 = (q[15] / q[19]) * q[18];
        for (uint256 c = c0; c < c0 + q[18]; c++) {
            for (uint256 u = 0; u < q[6]; u++) {
                (bool hit, uint256 i) = _source(q[16] + q[10], u * q[12], q[8], q[1]);
                if (hit) acc += _convTransposeRow(r, q, c, u, i);
            }
        }
        if (s.act.length == 3) acc += _at(r, 2, q[15]);
    }

    function _convTransposeRow(Reader memory r, uint256[20] memory q, uint256 c, uint256 u, uint256 i)
        private
        pure
        returns (int256 acc)
    {
        uint256 xb = (c * q[1] + i) * q[2];
        uint256 wb = ((c * q[19] + q[15] % q[19]) * q[6] + u) * q[7];
        for (uint256 v = 0; v < q[7]; v++) {
            (bool hit, uint256 j) = _source(q[17] + q[11], v * q[13], q[9], q[2]);
            if (hit) acc += _at(r, 0, xb + j) * _at(r, 1, wb + v);
        }
    }

    /// The input index i with i * stride = pos - tap (i < size), if there is one.
    function _source(uint256 pos, uint256 tap, uint256 stride, uint256 size) private pure returns (bool, uint256) {
        if (pos < tap || (pos - tap) % stride != 0 || (pos - tap) / stride >= size) return (false, 0);
        return (true, (pos - tap) / stride);
    }

    /// y[i, j] = t[x[i], j] (spec 15.1), rows of R elements. p = [R, rows].
    function _gather(int256[] calldata p, uint256 e, Reader memory r) private pure returns (int256) {
        uint256 rowSize = uint256(p[0]);
        int256 x = _at(r, 0, e / rowSize);
        if (x < 0 || x >= p[1]) revert GatherIndex(x);
        return _at(r, 1, uint256(x) * rowSize + e % rowSize);
    }

    /// floor(sqrt(a)) (spec 15.2), Newton's iteration from above. It starts at x = a, y = (a + 1) / 2
    /// (the first Newton step): y < x for every a >= 2 (a/2 + 1 is not: a = 2 returned 2).
    function isqrt(uint256 a) internal pure returns (uint256 x) {
        if (a < 2) return a;
        x = a;
        uint256 y = (a + 1) >> 1;
        while (y < x) {
            x = y;
            y = (x + a / x) >> 1;
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
