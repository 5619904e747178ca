"""The similarity example on the embedded chain: a sentence-embedding model registered on the oracle and
PolicyMatcher (contracts/src/examples/PolicyMatcher.sol) deciding, from the committed embeddings, which
policy clause a claim matches. Used by run.py and tests/chain/test_similarity_example.py.

The models (`load_source`):
- "minilm": all-MiniLM-L6-v2, exported by scripts/models/minilm_export.py into .cache/models/minilm with
  tokenized stdlib-docstring sentences (not in git: 90 MB);
- "fixture": fixtures/models/text_embedder.onnx, the committed two-layer encoder of fixtures/train/
  text_encoder.py cut at its mean-pooled, L2-normalised sentence vector, with its held-out token ids.
Both are converted by MRT with the encoder's wide tensors (mrt/text_precision.py)."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np
from web3.logs import DISCARD

import cvm
from cvm.chain.contracts import OracleConfig, deploy, send

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from oracle_setup import ARTIFACTS, OracleSetup, run_until_answered, setup_oracle  # noqa: E402
from oracle_setup import gas_by_request as _gas_by_request  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_ONNX = ROOT / "fixtures" / "models" / "text_embedder.onnx"
FIXTURE_DATA = ROOT / "fixtures" / "data" / "text_encoder.npz"
MINILM = ROOT / ".cache" / "models" / "minilm"
INPUTS = ("input_ids", "attention_mask")
THRESHOLD = Fraction(1, 2)  # a claim matches its best clause when their cosine is at least this
# PolicyMatcher's callback reads every clause: 2 of 3 as the credit example, with room for MiniLM's
# 384-wide clauses (a claim against 8 of them: ~0.6M gas, measured by run.py)
CONFIG = OracleConfig(quorum=2, committee_size=3, callback_gas_limit=2_000_000)


@dataclass
class Source:
    """A sentence encoder and its token ids: `calib` to convert with, `held` to draw clauses and claims
    from (never calibrated on), `sentences[i]` the text of held row i where known."""
    name: str
    onnx: Path
    calib: dict
    held: dict
    sentences: list[str] = field(default_factory=list)


def load_source(name: str) -> Source:
    if name == "fixture":
        with np.load(FIXTURE_DATA) as d:
            # the held-out examples in order (even rows: real sentences; odd: their words shuffled)
            return Source(name, FIXTURE_ONNX, {k: d[f"calib_{k}"].astype(np.int64) for k in INPUTS},
                          {k: d[f"test_{k}"][0::2].astype(np.int64) for k in INPUTS})
    path = MINILM / "minilm_L64.onnx"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: export it with scripts/models/minilm_export.py")
    with np.load(MINILM / "text_L64.npz") as d:
        calib = {k: d[f"calib_{k}"][:64] for k in INPUTS}
        held = {k: d[f"held_{k}"] for k in INPUTS}
    sentences = json.loads((MINILM / "sentences.json").read_text())
    held_text = sentences["held"] if isinstance(sentences, dict) else sentences[-len(held["input_ids"]):]
    return Source(name, path, calib, held, list(held_text))


def convert_source(source: Source) -> cvm.Model:
    """MRT with the encoder's wide tensors and, for MiniLM, 10-bit weights (docs/models.md's best row)."""
    from mrt.pipeline import convert

    return convert(str(source.onnx), source.calib, progress=False, wide="encoder",
                   weight_bits=10 if source.name == "minilm" else None)


def rows(source: Source, index) -> dict:
    return {k: v[index] for k, v in source.held.items()}


# ------------------------------------------------------------------ the decision rule, off chain


def decide(policies: list[np.ndarray], claim: np.ndarray, threshold: Fraction = THRESHOLD) -> tuple[bool, int, int]:
    """PolicyMatcher's rule on integer vectors, exactly: (matched, best clause, its dot product)."""
    c = [int(v) for v in claim]
    norm = [sum(x * x for x in p) for p in ([int(v) for v in q] for q in policies)]
    dots = [sum(a * int(b) for a, b in zip(c, p)) for p in policies]
    best = 0
    for i in range(1, len(policies)):  # cos_i > cos_best, cross-multiplied as the contract does
        if _signed_square(dots[i]) * norm[best] > _signed_square(dots[best]) * norm[i]:
            best = i
    cn = sum(x * x for x in c)
    d = dots[best]
    matched = d > 0 and cn > 0 and d * d * threshold.denominator ** 2 >= threshold.numerator ** 2 * cn * norm[best]
    return matched, best, d


def _signed_square(d: int) -> int:
    return -d * d if d < 0 else d * d


def decide_float(policies: np.ndarray, claim: np.ndarray, threshold: Fraction = THRESHOLD) -> tuple[bool, int, float]:
    """The same rule on float embeddings: (matched, best clause, its cosine)."""
    p = policies / np.linalg.norm(policies, axis=1, keepdims=True)
    cos = p @ (claim / np.linalg.norm(claim))
    best = int(np.argmax(cos))
    return bool(cos[best] >= float(threshold)), best, float(cos[best])


# ------------------------------------------------------------------ on chain


@dataclass
class Deployed(OracleSetup):
    matcher: object = None


def deploy_example(model: cvm.Model, workdir: Path, backend: str = "numba", claimants: int = 6,
                   threshold: Fraction = THRESHOLD) -> Deployed:
    """Chain, oracle (2 of 3), the encoder registered (two inputs: registerInputs), PolicyMatcher with the
    threshold, three staked operators; `claimants` funded accounts."""
    s = setup_oracle(model, workdir, "file:text_embedder.cvm", backend=backend, users=claimants,
                     requests_in_flight=2 * claimants, config=CONFIG)
    matcher, r = deploy(s.w3, s.deployer, "PolicyMatcher", s.oracle.address, model.hash, threshold.numerator,
                        threshold.denominator, directory=ARTIFACTS)
    s.gas.insert(4, ["deploy PolicyMatcher", r["gasUsed"], f"threshold cos >= {threshold}"])
    return Deployed(**vars(s), matcher=matcher)


def _request(d: Deployed, account, fn, event: str, tokens: bytes) -> int:
    fee = d.oracle.functions.feeFor(d.model.hash).call()
    r = send(d.w3, account, fn(tokens), value=fee)
    return getattr(d.matcher.events, event)().process_receipt(r, errors=DISCARD)[0]["args"]["requestId"]


def add_policies(d: Deployed, inputs: list[bytes]) -> list[int]:
    """The owner submits each clause's model input; the operators answer; returns the request ids."""
    ids = [_request(d, d.deployer, d.matcher.functions.addPolicy, "PolicyRequested", x) for x in inputs]
    run_until_answered(d, ids)
    return ids


def submit_claims(d: Deployed, inputs: list[bytes]) -> list[int]:
    """One claim per claimant account, then the operators answer; returns the request ids."""
    ids = [_request(d, account, d.matcher.functions.submitClaim, "ClaimSubmitted", x)
           for account, x in zip(d.users, inputs)]
    run_until_answered(d, ids)
    return ids


def claim(d: Deployed, request_id: int) -> dict:
    claimant, decided, matched, policy, dot, norm2, tokens_hash = d.matcher.functions.claims(request_id).call()
    return {"claimant": claimant, "decided": decided, "matched": matched, "policy": policy, "dot": dot,
            "claim_norm2": norm2, "tokens_hash": bytes(tokens_hash)}


def stored_policies(d: Deployed) -> list[np.ndarray]:
    """The clause embeddings PolicyMatcher stored, decoded with the model's output spec."""
    n = d.matcher.functions.policyCount().call()
    return [d.model.decode_output(bytes(d.matcher.functions.policies(i).call()))[0] for i in range(n)]


def gas_by_request(d: Deployed, from_block: int) -> dict[int, list[list]]:
    return _gas_by_request(d, d.matcher, "ClaimSubmitted", "PolicyMatcher.submitClaim", from_block)
