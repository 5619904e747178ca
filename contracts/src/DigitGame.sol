// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "./ModelRegistry.sol";
import {InferenceOracle} from "./InferenceOracle.sol";
import {IInferenceConsumer} from "./IInferenceConsumer.sol";
import {ICVM} from "./ICVM.sol";

/// @title DigitGame
/// @notice A player submits a handwritten digit (the model's integer input) and a guess of what
/// the classifier will say. The image is classified either asynchronously by the oracle (`play`)
/// or synchronously by the CVM precompile (`playNow`, embedded chain only). The contract decodes
/// the integer logits, takes the argmax and records a win when it equals the guess; a win also
/// earns `prize` from the contract's balance while the pool lasts (pulled with `claimPrize`).
/// If the oracle lets a request expire, `refund` returns the player's fee.
contract DigitGame is IInferenceConsumer {
    struct Game {
        address player;
        uint8 guess;
        bool resolved;
        uint80 fee;
    }

    InferenceOracle public immutable oracle;
    bytes32 public immutable modelHash;
    uint256 public immutable numClasses;
    uint256 public immutable elementBytes;
    uint256 public immutable prize;

    mapping(uint256 => Game) public games; // by oracle request id
    mapping(address => uint256) public wins;
    mapping(address => uint256) public prizes;
    uint256 public reservedPrizes; // won, not yet claimed
    uint256 public refundPool; // refunds pulled from the oracle, not yet paid to their players

    event GameStarted(uint256 indexed requestId, address indexed player, uint8 guess);
    event GamePlayed(uint256 indexed requestId, address indexed player, uint8 guess, uint256 predicted, bool won);

    error NotOracle(address caller);
    error UnknownGame(uint256 requestId);
    error AlreadyResolved(uint256 requestId);
    error WrongOutputLength(uint256 length, uint256 expected);
    error NotExpired(uint256 requestId);
    error NothingToClaim(address player);
    error TransferFailed();

    constructor(InferenceOracle oracle_, bytes32 modelHash_, uint256 prize_) payable {
        oracle = oracle_;
        modelHash = modelHash_;
        prize = prize_;
        ModelRegistry.Model memory m = oracle_.registry().getModel(modelHash_);
        elementBytes = oracle_.registry().elementBytes(m.output.bits);
        numClasses = m.outputBytes / elementBytes;
    }

    receive() external payable {}

    /// Asynchronous: forwards msg.value as the oracle fee; the result arrives in onInferenceResult.
    function play(bytes calldata image, uint8 guess) external payable returns (uint256 requestId) {
        requestId = oracle.request{value: msg.value}(modelHash, image, address(this));
        games[requestId] = Game({player: msg.sender, guess: guess, resolved: false, fee: uint80(msg.value)});
        emit GameStarted(requestId, msg.sender, guess);
    }

    function onInferenceResult(uint256 requestId, bytes32, bytes calldata output) external {
        if (msg.sender != address(oracle)) revert NotOracle(msg.sender);
        Game storage g = games[requestId];
        if (g.player == address(0)) revert UnknownGame(requestId);
        if (g.resolved) revert AlreadyResolved(requestId);
        g.resolved = true;
        _score(requestId, g.player, g.guess, output);
    }

    /// Synchronous, through the CVM precompile: the result is known in the same transaction.
    function playNow(bytes calldata image, uint8 guess) external returns (uint256 predicted, bool won) {
        bytes memory output = ICVM.infer(modelHash, image);
        return _score(0, msg.sender, guess, output);
    }

    /// Pays the fee of an expired request back to its player (the oracle refunded it to this contract).
    function refund(uint256 requestId) external {
        Game storage g = games[requestId];
        if (g.player == address(0)) revert UnknownGame(requestId);
        if (g.resolved) revert AlreadyResolved(requestId);
        if (oracle.statusOf(requestId) != InferenceOracle.Status.Expired) revert NotExpired(requestId);
        g.resolved = true;
        uint256 owed = oracle.claimable(address(this));
        if (owed > 0) {
            refundPool += owed;
            oracle.claim();
        }
        refundPool -= g.fee;
        (bool ok,) = payable(g.player).call{value: g.fee}("");
        if (!ok) revert TransferFailed();
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
