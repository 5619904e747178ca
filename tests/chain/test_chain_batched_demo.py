"""The batched round of the demo (cvm/chain/batch_demo.py) on the embedded chain: BatchedOracle,
DigitGame, an in-process relay and three batch_node operators; its checks pass (finalised, the
callback scored the image, every member revealed, the round in three transactions)."""

import pytest
from chainkit import BACKEND

from cvm.chain.batch_demo import run_batched_demo

pytestmark = pytest.mark.chain


def test_the_batched_demo_passes_its_checks(capsys):
    assert run_batched_demo(backend=BACKEND) == 0
    assert "demo: all checks passed" in capsys.readouterr().out
