// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

/// @title RefereeMerkle
/// @notice The word trees of the dispute game (cvm/chain/trace.py): a tensor's wire bytes,
/// zero-padded to 32-byte words, are the leaves (not hashed) of a Merkle tree padded with zero words
/// to a power of two, each parent keccak256(left ++ right); a tensor of one word is its own root.
library RefereeMerkle {
    error BadMultiproof();

    /// Levels above the leaves of a tree with `count` leaves.
    function depthFor(uint256 count) internal pure returns (uint8 d) {
        while ((uint256(1) << d) < count) d++;
    }

    /// Word count of `n` bytes.
    function wordCount(uint256 n) internal pure returns (uint256) {
        return n == 0 ? 1 : (n + 31) / 32;
    }

    /// The word root of bytes given whole (the input and the output: a few KB at most).
    function wordRoot(bytes calldata data) internal pure returns (bytes32) {
        uint256 n = wordCount(data.length);
        uint256 width = uint256(1) << depthFor(n);
        bytes32[] memory level = new bytes32[](width);
        for (uint256 i = 0; i < n; i++) {
            uint256 start = i * 32;
            bytes32 w;
            if (start + 32 <= data.length) {
                w = bytes32(data[start:start + 32]);
            } else if (start < data.length) {
                bytes memory tail = new bytes(32);
                for (uint256 k = start; k < data.length; k++) tail[k - start] = data[k];
                w = bytes32(tail);
            }
            level[i] = w;
        }
        while (width > 1) {
            width >>= 1;
            for (uint256 i = 0; i < width; i++) {
                level[i] = keccak256(abi.encodePacked(level[2 * i], level[2 * i + 1]));
            }
        }
        return level[0];
    }

    /// The root that the leaves at sorted distinct `idx` and the siblings `proof` give, in a tree of
    /// `depth` levels (cvm.chain.trace.multiproof's order: level by level, left to right).
    function multiRoot(uint256[] calldata idx, bytes32[] calldata leaves, bytes32[] calldata proof, uint8 depth)
        internal
        pure
        returns (bytes32)
    {
        uint256 n = idx.length;
        if (n == 0 || leaves.length != n) revert BadMultiproof();
        uint256[] memory ix = new uint256[](n);
        bytes32[] memory h = new bytes32[](n);
        for (uint256 i = 0; i < n; i++) {
            if (i > 0 && idx[i] <= idx[i - 1]) revert BadMultiproof();
            (ix[i], h[i]) = (idx[i], leaves[i]);
        }
        if (idx[n - 1] >> depth != 0) revert BadMultiproof();
        uint256 p = 0;
        for (uint8 level = 0; level < depth; level++) {
            uint256 m = 0;
            for (uint256 i = 0; i < n;) {
                uint256 x = ix[i];
                bytes32 parent;
                if (x & 1 == 0 && i + 1 < n && ix[i + 1] == x + 1) {
                    parent = keccak256(abi.encodePacked(h[i], h[i + 1]));
                    i += 2;
                } else {
                    if (p >= proof.length) revert BadMultiproof();
                    parent = x & 1 == 0
                        ? keccak256(abi.encodePacked(h[i], proof[p]))
                        : keccak256(abi.encodePacked(proof[p], h[i]));
                    p++;
                    i += 1;
                }
                (ix[m], h[m]) = (x >> 1, parent);
                m++;
            }
            n = m;
        }
        if (p != proof.length) revert BadMultiproof();
        return h[0];
    }

    /// Element `j` (of `size` bytes: 1, 2 or 4, the storage types) of a word, little-endian two's
    /// complement: the bytes reversed with masks rather than a loop (a referee reads thousands).
    function element(bytes32 word, uint256 j, uint256 size) internal pure returns (int256) {
        if (size == 1) return int256(int8(uint8(uint256(word) >> (8 * (31 - j)))));
        uint256 raw = uint256(word) >> (8 * (32 - j * size - size));
        if (size == 2) return int256(int16(uint16(((raw & 0xff) << 8) | ((raw >> 8) & 0xff))));
        return int256(int32(uint32(
            ((raw & 0xff) << 24) | ((raw & 0xff00) << 8) | ((raw >> 8) & 0xff00) | ((raw >> 24) & 0xff)
        )));
    }
}
