// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.28;

import {ModelRegistry} from "../ModelRegistry.sol";
import {InferenceOracle} from "../InferenceOracle.sol";
import {InferenceConsumer} from "../InferenceConsumer.sol";

/// @title PolicyMatcher
/// @notice Matches a claim to a policy clause by meaning, with a sentence-embedding model run by the
/// oracle (examples/similarity). Both the clauses and the claims are embedded by the same registered
/// model, so no number on chain comes from the deployer: the owner submits each clause's token ids
/// (`addPolicy`), the operators run the model and the oracle calls back with the clause's embedding,
/// which is stored; a claimant submits a claim's token ids (`submitClaim`) and the callback compares
/// the claim's embedding with every stored clause.
///
/// The decision is exact integer arithmetic on the committed output (little-endian integers, the
/// registry's output spec): with c the claim's vector and p a clause's, cos = c.p / (|c| |p|); the
/// best clause is the one with the largest cos, and the claim matches it when cos >= num / den
/// (compared as (c.p)^2 * den^2 >= num^2 * |c|^2 * |p|^2 with c.p > 0: no square root, no rounding,
/// whatever the output scale). The same rule in Python (examples/similarity/similarity_chain.py,
/// `decide`) gives the same clause and score bit for bit.
///
/// What this contract does not check: that the token ids are the tokenizer's output for the text
/// shown to users. They are whatever the sender sent (their hash is recorded); the tokenizer is
/// deterministic, so anyone can re-tokenize a published text and compare the hash.
contract PolicyMatcher is InferenceConsumer {
    enum Kind {
        None,
        Policy,
        Claim
    }

    struct Claim {
        address claimant;
        bool decided;
        bool matched;
        uint16 policy; // best clause (meaningful when decided and there are clauses)
        int256 dot; // c.p for that clause
        uint256 claimNorm2; // |c|^2
        bytes32 tokensHash;
    }

    bytes32 public immutable modelHash;
    uint256 public immutable elementBytes;
    uint256 public immutable dims;
    uint256 public immutable thresholdNum;
    uint256 public immutable thresholdDen;
    address public immutable owner;

    bytes[] public policies; // embeddings, as the oracle returned them
    uint256[] public policyNorm2; // |p|^2 of each
    mapping(uint256 => Kind) public kindOf; // by oracle request id, until answered or refunded
    mapping(uint256 => Claim) public claims; // by oracle request id

    event PolicyRequested(uint256 indexed requestId, bytes32 tokensHash);
    event PolicyAdded(uint256 indexed requestId, uint256 index, uint256 norm2);
    event ClaimSubmitted(uint256 indexed requestId, address indexed claimant, bytes32 tokensHash);
    event ClaimDecided(uint256 indexed requestId, bool matched, uint256 policy, int256 dot, uint256 claimNorm2);
    event Refunded(uint256 indexed requestId, address to, uint256 fee);

    error NotOwner(address caller);
    error BadThreshold();
    error WrongOutputLength(uint256 length, uint256 expected);
    error TooManyPolicies();
    error TransferFailed();

    uint256 public constant MAX_POLICIES = 64; // bounds the callback's loop (callbackGasLimit)

    constructor(InferenceOracle oracle_, bytes32 modelHash_, uint256 thresholdNum_, uint256 thresholdDen_)
        InferenceConsumer(oracle_)
    {
        if (thresholdDen_ == 0 || thresholdNum_ > thresholdDen_) revert BadThreshold();
        modelHash = modelHash_;
        thresholdNum = thresholdNum_;
        thresholdDen = thresholdDen_;
        owner = msg.sender;
        ModelRegistry.Model memory m = oracle_.registry().getModel(modelHash_);
        elementBytes = oracle_.registry().elementBytes(m.output.bits);
        dims = m.outputBytes / elementBytes;
    }

    function policyCount() external view returns (uint256) {
        return policies.length;
    }

    /// Embeds a policy clause (its model input: token ids, then the attention mask); msg.value is the
    /// oracle fee. The clause is stored when the oracle answers.
    function addPolicy(bytes calldata tokens) external payable returns (uint256 requestId) {
        if (msg.sender != owner) revert NotOwner(msg.sender);
        if (policies.length >= MAX_POLICIES) revert TooManyPolicies();
        requestId = _requestInference(modelHash, tokens, msg.value, 0);
        kindOf[requestId] = Kind.Policy;
        emit PolicyRequested(requestId, keccak256(tokens));
    }

    /// Submits a claim (its model input) paying the oracle fee; decided when the oracle answers.
    function submitClaim(bytes calldata tokens) external payable returns (uint256 requestId) {
        requestId = _requestInference(modelHash, tokens, msg.value, 0);
        kindOf[requestId] = Kind.Claim;
        bytes32 tokensHash = keccak256(tokens);
        claims[requestId] = Claim(msg.sender, false, false, 0, 0, 0, tokensHash);
        emit ClaimSubmitted(requestId, msg.sender, tokensHash);
    }

    function _onResult(uint256 requestId, bytes calldata output) internal override {
        if (output.length != dims * elementBytes) revert WrongOutputLength(output.length, dims * elementBytes);
        Kind kind = kindOf[requestId];
        delete kindOf[requestId];
        if (kind == Kind.Policy) {
            if (policies.length >= MAX_POLICIES) revert TooManyPolicies();
            uint256 norm2 = uint256(dot(output, output));
            policies.push(output);
            policyNorm2.push(norm2);
            emit PolicyAdded(requestId, policies.length - 1, norm2);
        } else {
            _decide(requestId, output);
        }
    }

    /// The best clause by cosine, and whether it passes the threshold (see the contract's notice).
    function _decide(uint256 requestId, bytes calldata output) private {
        bytes memory claim = output;
        uint256 claimNorm2 = uint256(dot(claim, claim));
        (uint256 best, int256 bestDot) = _best(claim);
        bool matched = policies.length > 0 && bestDot > 0 && claimNorm2 > 0
            && uint256(bestDot) ** 2 * thresholdDen ** 2 >= thresholdNum ** 2 * claimNorm2 * policyNorm2[best];
        Claim storage c = claims[requestId];
        (c.decided, c.matched, c.policy) = (true, matched, uint16(best));
        (c.dot, c.claimNorm2) = (bestDot, claimNorm2);
        emit ClaimDecided(requestId, matched, best, bestDot, claimNorm2);
    }

    /// The clause with the largest cosine to `claim` (the first of equals) and their dot product.
    function _best(bytes memory claim) private view returns (uint256 best, int256 bestDot) {
        for (uint256 i = 0; i < policies.length; i++) {
            int256 d = dot(claim, policies[i]);
            if (i == 0 || _cosGreater(d, policyNorm2[i], bestDot, policyNorm2[best])) (best, bestDot) = (i, d);
        }
    }

    /// d1 / |p1| > d2 / |p2| (the claim's norm is common), as sign(d) d^2 cross-multiplied by the norms.
    function _cosGreater(int256 d1, uint256 n1, int256 d2, uint256 n2) private pure returns (bool) {
        return _signedSquare(d1) * int256(n2) > _signedSquare(d2) * int256(n1);
    }

    function _signedSquare(int256 d) private pure returns (int256) {
        return d < 0 ? -(d * d) : d * d;
    }

    /// The dot product of two vectors of `dims` little-endian two's-complement integers of
    /// `elementBytes` (1, 2 or 4: the registry's storage types) bytes each: one 32-byte load per element
    /// and operand, the element's bytes reversed and sign-extended in registers.
    function dot(bytes memory a, bytes memory b) public view returns (int256 sum) {
        uint256 size = elementBytes;
        uint256 n = dims;
        if (a.length < n * size || b.length < n * size) revert WrongOutputLength(a.length < b.length ? a.length : b.length, n * size);
        assembly {
            function element(p, size_) -> v {
                let w := shr(sub(256, mul(8, size_)), mload(p)) // the element's bytes, first byte highest
                switch size_
                case 1 { v := signextend(0, w) }
                case 2 { v := signextend(1, or(shl(8, and(w, 0xff)), shr(8, w))) }
                default {
                    w := or(shl(8, and(w, 0x00ff00ff)), and(shr(8, w), 0x00ff00ff))
                    v := signextend(3, or(shl(16, and(w, 0xffff)), shr(16, w)))
                }
            }
            let pa := add(a, 32)
            let pb := add(b, 32)
            for { let i := 0 } lt(i, n) { i := add(i, 1) } {
                let off := mul(i, size)
                sum := add(sum, mul(element(add(pa, off), size), element(add(pb, off), size)))
            }
        }
    }

    /// An expired request: the fee goes back to whoever sent it.
    function _onRefund(uint256 requestId, uint256 fee) internal override {
        Kind kind = kindOf[requestId];
        delete kindOf[requestId];
        address to = kind == Kind.Claim ? claims[requestId].claimant : owner;
        emit Refunded(requestId, to, fee);
        (bool ok,) = payable(to).call{value: fee}("");
        if (!ok) revert TransferFailed();
    }
}
