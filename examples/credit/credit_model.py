"""The credit example's model and its decision rule, shared by the training script
(fixtures/train/credit.py), the end-to-end run (run.py) and the test (tests/chain/test_credit_example.py).

The model is an XGBoost classifier of default risk on the German credit data; its converted CVM form
outputs two int16 columns, [-m, m], where m is the model's margin: the log-odds that the applicant is a
bad risk (the sigmoid is left to the client, as for every converted binary booster). The contract reads
column 1 and compares it with integer cutoffs, one per probability-of-default bound; `tiers_of_margin` is
the same rule on float margins, so the float model's decision and the chain's can be compared tier by tier.
"""
from __future__ import annotations

import math
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "models"
DATA = FIXTURES / "credit_german.npz"
ONNX = FIXTURES / "credit_xgb.onnx"
META = FIXTURES / "credit_xgb.json"
SEED = 0
TEST_FRACTION = 0.25

# The model's inputs, in the UCI file's order. Left out on purpose: personal_status_and_sex and
# foreign_worker (a lender may not price on sex or nationality; the float and the chain model both lack them).
FEATURES = (
    "status_of_existing_checking_account", "duration_in_month", "credit_history", "purpose", "credit_amount",
    "savings_account_and_bonds", "present_employment_since", "installment_rate_in_percentage_of_disposable_income",
    "other_debtors_or_guarantors", "present_residence_since", "property", "age_in_years",
    "other_installment_plans", "housing", "number_of_existing_credits_at_this_bank", "job",
    "number_of_people_being_liable_to_provide_maintenance_for", "telephone",
)

# Probability-of-default bounds, loosest first, and the share of the maximum line each one earns:
# PD < 35% -> 25%, PD < 20% -> 50%, PD < 10% -> 100%; PD >= 35% is denied.
PD_BOUNDS = (0.35, 0.20, 0.10)
LINE_SHARES_PCT = (25, 50, 100)
MAX_LINE = 10_000 * 10**18  # in the lending pool's token units (18 decimals): 10,000 tokens


def split():
    """(x_train, x_test, y_train, y_test): float32 features, y = 1 for a bad risk; stratified, fixed seed."""
    from sklearn.model_selection import train_test_split

    if not DATA.exists():
        raise FileNotFoundError(f"{DATA} is missing; write it with python fixtures/train/credit.py")
    with np.load(DATA) as z:
        x, y = z["x"].astype(np.float32), z["y"]
    return train_test_split(x, y, test_size=TEST_FRACTION, random_state=SEED, stratify=y)


@cache
def convert_model():
    """The committed ONNX model converted by MRT (calibrated on the training split; the tree lowering's
    scales come from the proven ranges, so the result does not depend on the calibration rows)."""
    from mrt.pipeline import convert

    xtr = split()[0]
    return convert(str(ONNX), xtr, progress=False)


@cache
def _session():
    import onnxruntime as ort
    return ort.InferenceSession(str(ONNX), providers=["CPUExecutionProvider"])


def float_pd(x: np.ndarray) -> np.ndarray:
    """The float model's probability of default (onnxruntime on the committed ONNX)."""
    return _session().run(None, {"x": np.asarray(x, np.float32)})[1][:, 1].astype(np.float64)


def float_margin(x: np.ndarray) -> np.ndarray:
    """The float model's margin (log-odds of default), from its float32 probability."""
    p = np.clip(float_pd(x), 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def margin_bounds() -> np.ndarray:
    """PD_BOUNDS as log-odds."""
    return np.array([math.log(p / (1 - p)) for p in PD_BOUNDS])


def tiers_of_margin(m: np.ndarray) -> np.ndarray:
    """0 = denied, i = passes the first i bounds (earns LINE_SHARES_PCT[i - 1])."""
    return (np.asarray(m, np.float64)[:, None] < margin_bounds()[None, :]).sum(axis=1)


def int_cutoffs(step: float) -> list[int]:
    """The bounds in the integer model's output units, for the contract: an integer score s passes bound
    L when s * step < L, i.e. s < L / step, i.e. s < ceil(L / step) (s is an integer)."""
    return [int(math.ceil(b / step)) for b in margin_bounds()]


def line_of_tier(tier: int) -> int:
    return 0 if tier == 0 else MAX_LINE * LINE_SHARES_PCT[tier - 1] // 100


def near_bound(m: np.ndarray, step: float) -> np.ndarray:
    """Applicants whose float margin lies within 2 output steps of a bound: a computation at the integer
    model's resolution may place them on either side (counted, never silently excluded)."""
    return (np.abs(np.asarray(m, np.float64)[:, None] - margin_bounds()[None, :]) <= 2 * step).any(axis=1)
