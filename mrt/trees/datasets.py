"""The tabular data sets the tree fixtures are trained and checked on: scikit-learn's bundled sets, read
from the installed package (no download), split once with a fixed seed so that the training script, the
tests and the measurements all see the same test split. Needs scikit-learn (the dev extra)."""
from __future__ import annotations

import numpy as np

# name -> (sklearn loader, task)
DATASETS = {
    "cancer": ("load_breast_cancer", "classification"),   # 569 x 30, 2 classes
    "wine": ("load_wine", "classification"),               # 178 x 13, 3 classes
    "digits": ("load_digits", "classification"),           # 1797 x 64, 10 classes
    "iris": ("load_iris", "classification"),               # 150 x 4, 3 classes
    "diabetes": ("load_diabetes", "regression"),           # 442 x 10
}
SEED = 0
TEST_FRACTION = 0.25


def split(name: str):
    """(x_train, x_test, y_train, y_test), features float32, stratified for classification."""
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}; choose from {sorted(DATASETS)}")
    loader, task = DATASETS[name]
    x, y = getattr(sklearn.datasets, loader)(return_X_y=True)
    x = np.asarray(x, np.float32)
    return train_test_split(x, y, test_size=TEST_FRACTION, random_state=SEED,
                            stratify=y if task == "classification" else None)
