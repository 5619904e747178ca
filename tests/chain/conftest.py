import os

import pytest
from chainkit import make_env


@pytest.fixture
def env(tmp_path):
    return make_env(tmp_path)


@pytest.fixture
def salts():
    return [os.urandom(32) for _ in range(5)]
