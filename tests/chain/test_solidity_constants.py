"""Every constant of the Solidity sources is either the mirror of a Python fact (and equal to it) or
named here as Solidity's own, with the reason. ModelRegistry once allowed rank 8 where CVM allows 6,
and refused 2^24-element int32 inputs that CVM accepts."""
import re
from pathlib import Path

import pytest

from cvm import limits
from cvm.chain import model_commitment, protocol
from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS
from cvm.chain.trace_precompile import CVM_TRACE_ADDRESS

SOURCES = Path(__file__).parents[2] / "contracts" / "src"
CONSTANT = re.compile(r"\b(?:uint\d*|int\d*|address)\s+(?:public\s+|internal\s+|private\s+)?constant\s+(\w+)\s*=\s*([^;]+);")

MIRRORS = {  # (contract file, constant) -> the Python value it must equal
    ("ModelRegistry", "MAX_BITS"): limits.MAX_BITS,
    ("ModelRegistry", "MAX_RANK"): limits.MAX_RANK,
    # int32 elements, 4 bytes each: opset 1's per-sample tensor limit (opset 2 admits larger tensors;
    # the registry does not register models whose input or output sample is larger than this yet)
    ("ModelRegistry", "MAX_SAMPLE_BYTES"): limits.LIMITS[1].tensor_elements * 4,
    ("ICVM", "PRECOMPILE"): int.from_bytes(CVM_PRECOMPILE_ADDRESS, "big"),
    ("ICVM", "TRACE_PRECOMPILE"): int.from_bytes(CVM_TRACE_ADDRESS, "big"),
    ("Referee", "NONE"): model_commitment.ACTIVATION_NONE,
    ("DisputeGame", "WORD_LEVELS"): model_commitment.WORD_LEVELS,  # word-tree levels per Inner round
    ("InferenceOracle", "MAX_COMMITTEE"): protocol.MAX_COMMITTEE,  # seats: every drawn operator that commits
    # the referee's op codes (cvm.chain.model_commitment.OPS; reshape and flatten share one)
    **{("Referee", op.upper()): code for op, code in model_commitment.OPS.items() if op != "flatten"},
}
SOLIDITY_ONLY = {  # constants with no Python counterpart, and why
    ("ModelRegistry", "REFEREE_DELAY"): "how long a listing's replaced referee commitment waits (longer than a request's life)",
    ("InferenceOracle", "CALLBACK_GAS_RESERVE"): "gas kept back for the oracle after a consumer's callback",
    ("DisputeGame", "MAX_DEPTH"): "2^16 trace leaves: more than the largest graph's nodes plus its input (tested)",
    ("InferenceOracle", "MAX_CALLBACK_GAS"): "bounds callbackGasLimit so that a finalising reveal fits a block",
    ("InferenceOracle", "REVEAL_BASE_GAS"): "revealGas: a reveal's own work (the node reads revealGas())",
    ("InferenceOracle", "PER_COMMITTER_GAS"): "revealGas: what finalising adds per seat (payment, bond)",
    ("InferenceOracle", "OPERATOR_ROUND_GAS"): "feeFor: the chain gas of one operator's commit and reveal",
    ("ModelRegistry", "MAX_INPUTS"): "bounds registerInputs' loop; the format has no input count limit of its own",
}


def _value(text: str) -> int:
    text = text.replace("_", "").strip()
    if m := re.fullmatch(r"address\((0x[0-9a-fA-F]+)\)", text):
        return int(m.group(1), 16)
    if m := re.fullmatch(r"(\d+)\s*days", text):
        return int(m.group(1)) * 86_400
    if m := re.fullmatch(r"(\d+)\s*<<\s*(\d+)", text):
        return int(m.group(1)) << int(m.group(2))
    return int(text, 0)


def _constants() -> dict[tuple[str, str], int]:
    found = {}
    for path in sorted(SOURCES.glob("*.sol")):
        for name, value in CONSTANT.findall(path.read_text()):
            found[(path.stem, name)] = _value(value)
    return found


def test_every_constant_is_known():
    found = _constants()
    unknown = set(found) - set(MIRRORS) - set(SOLIDITY_ONLY)
    assert not unknown, f"add these to MIRRORS (with the Python value) or SOLIDITY_ONLY (with why): {sorted(unknown)}"
    assert set(MIRRORS) | set(SOLIDITY_ONLY) <= set(found), "a listed constant is gone from the sources"


@pytest.mark.parametrize("key", sorted(MIRRORS), ids=lambda k: ".".join(k))
def test_mirrored_constants_agree(key):
    assert _constants()[key] == MIRRORS[key]


def test_the_dispute_game_holds_the_largest_trace():
    leaves = max(lim.nodes for lim in limits.LIMITS.values()) + 1  # the input, then each node's output
    assert (leaves - 1).bit_length() <= _constants()[("DisputeGame", "MAX_DEPTH")]
