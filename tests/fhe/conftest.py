"""FHE backend tests: run in .venv-fhe (bash scripts/setup_fhe.sh), skipped where concrete is absent."""
import os

import numpy as np
import pytest

pytest.importorskip("concrete.fhe", reason="needs the fhe extra: bash scripts/setup_fhe.sh")


HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(item.fspath).startswith(HERE):
            item.add_marker(pytest.mark.fhe)


@pytest.fixture(scope="session", autouse=True)
def key_dir(tmp_path_factory):
    """Keys of the test circuits live in a session directory unless CVM_FHE_KEY_DIR is set."""
    if os.environ.get("CVM_FHE_KEY_DIR"):
        yield os.environ["CVM_FHE_KEY_DIR"]
        return
    path = tmp_path_factory.mktemp("fhe-keys")
    os.environ["CVM_FHE_KEY_DIR"] = str(path)
    yield str(path)
    del os.environ["CVM_FHE_KEY_DIR"]


def extremes(model, n: int, seed: int = 0) -> np.ndarray:
    """+max, -max, 0 and random integer samples for a one-input model."""
    spec = model.inputs[0]
    m = (1 << (spec.bits - 1)) - 1
    shape = spec.shape[1:]
    rng = np.random.default_rng(seed)
    fixed = [np.full(shape, m), np.full(shape, -m), np.zeros(shape, np.int64)]
    rand = [rng.integers(-m, m + 1, shape) for _ in range(max(0, n - 3))]
    return np.stack(fixed + rand).astype(spec.dtype)
