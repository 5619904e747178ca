// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "./ModelRegistry.sol";
import {InferenceOracle} from "./InferenceOracle.sol";
import {InferenceConsumer} from "./InferenceConsumer.sol";
import {ICVM} from "./ICVM.sol";

/// @title DigitGame
/// @notice A player submits a handwritten digit (the model's integer input) and a guess of what
/// the classifier will say. The image is classified either asynchronously by the oracle (`play`)
/// or synchronously by the CVM precompile (`playNow`, embedded chain only). The contract decodes
/// the integer logits, takes the argmax and records a win when it equals the guess; a win also
/// earns `prize` from the contract's balance while the pool lasts (pulled with `claimPrize`).
/// It inherits InferenceConsumer: only results of its own requests for its model are scored, and
/// if the oracle lets a request expire, `reclaimExpired` (alias `refund`) returns the player's fee.
contract DigitGame is InferenceConsumer {
    struct Game {
        address player;
        uint8 guess;
    }

    bytes32 public immutable modelHash;
    uint256 public immutable numClasses;
    uint256 public immutable elementBytes;
    uint256 public immutable prize;
    uint64 public immutable challengeWindow; // 0: trust the oracle's k-of-n majority

    mapping(uint256 => Game) public games; // by oracle request id, until resolved
    mapping(address => uint256) public wins;
    mapping(address => uint256) public prizes;
    uint256 public reservedPrizes; // won, not yet claimed

    event GameStarted(uint256 indexed requestId, address indexed player, uint8 guess);
    event GamePlayed(uint256 indexed requestId, address indexed player, uint8 guess, uint256 predicted, bool won);
    event GameRefunded(uint256 indexed requestId, address indexed player, uint256 fee);

    error WrongOutputLength(uint256 length, uint256 expected);
    error NothingToClaim(address player);
    error TransferFailed();

    constructor(InferenceOracle oracle_, bytes32 modelHash_, uint256 prize_, uint64 challengeWindow_)
        payable
        InferenceConsumer(oracle_)
    {
        modelHash = modelHash_;
        prize = prize_;
        challengeWindow = challengeWindow_;
        ModelRegistry.Model memory m = oracle_.registry().getModel(modelHash_);
        elementBytes = oracle_.registry().elementBytes(m.output.bits);
        numClasses = m.outputBytes / elementBytes;
    }

    /// Asynchronous: forwards msg.value as the oracle fee; the result arrives in _onResult.
    function play(bytes calldata image, uint8 guess) external payable returns (uint256 requestId) {
        requestId = _requestInference(modelHash, image, msg.value, challengeWindow);
        games[requestId] = Game({player: msg.sender, guess: guess});
        emit GameStarted(requestId, msg.sender, guess);
    }

    function _onResult(uint256 requestId, bytes calldata output) internal override {
        Game memory g = games[requestId];
        delete games[requestId];
        _score(requestId, g.player, g.guess, output);
    }

    /// Pays the fee of an expired request back to its player.
    function refund(uint256 requestId) external {
        reclaimExpired(requestId);
    }

    function _onRefund(uint256 requestId, uint256 fee) internal override {
        address player = games[requestId].player;
        delete games[requestId];
        emit GameRefunded(requestId, player, fee);
        (bool ok,) = payable(player).call{value: fee}("");
        if (!ok) revert TransferFailed();
    }

    /// Synchronous, through the CVM precompile: the result is known in the same transaction.
    function playNow(bytes calldata image, uint8 guess) external returns (uint256 predicted, bool won) {
        bytes memory output = ICVM.infer(modelHash, image);
        return _score(0, msg.sender, guess, output);
    }

    function claimPrize() external {
        uint256 amount = prizes[msg.sender];
        if (amount == 0) revert NothingToClaim(msg.sender);
        prizes[msg.sender] = 0;
        reservedPrizes -= amount;
        (bool ok,) = payable(msg.sender).call{value: amount}("");
        if (!ok) revert TransferFailed();
    }

    /// Index of the largest logit (the first one on a tie, as numpy's argmax).
    function argmax(bytes memory output) public view returns (uint256 best) {
        uint256 expected = numClasses * elementBytes;
        if (output.length != expected) revert WrongOutputLength(output.length, expected);
        int256 bestValue = type(int256).min;
        for (uint256 i = 0; i < numClasses; i++) {
            int256 v = decodeInt(output, i * elementBytes, elementBytes);
            if (v > bestValue) (best, bestValue) = (i, v);
        }
    }

    /// Reads a little-endian two's-complement integer of `size` bytes at `offset`.
    function decodeInt(bytes memory data, uint256 offset, uint256 size) public pure returns (int256) {
        uint256 raw = 0;
        for (uint256 b = 0; b < size; b++) {
            raw |= uint256(uint8(data[offset + b])) << (8 * b);
        }
        uint256 signBit = 1 << (8 * size - 1);
        return raw >= signBit ? int256(raw) - int256(signBit << 1) : int256(raw);
    }

    function _score(uint256 requestId, address player, uint8 guess, bytes memory output)
        private
        returns (uint256 predicted, bool won)
    {
        predicted = argmax(output);
        won = predicted == guess;
        if (won) {
            wins[player] += 1;
            if (address(this).balance >= reservedPrizes + refundPool + prize) {
                prizes[player] += prize;
                reservedPrizes += prize;
            }
        }
        emit GamePlayed(requestId, player, guess, predicted, won);
    }
}
