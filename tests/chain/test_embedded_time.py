"""Chain time on the embedded chain is the chain's own (cvm/chain/embedded.py): a block is BLOCK_TIME
after its parent however long the machine took between them, and advance_time counts from the latest
block, so a slow step can no longer put its target behind the pending block (eth-tester's "Space time
continuum distortion detected", seen on a loaded machine)."""

from __future__ import annotations

import time

import pytest
from chainkit import BACKEND
from eth._utils import headers

from cvm.chain.embedded import BLOCK_TIME, EmbeddedChain
from cvm.chain.store import ModelStore

pytestmark = pytest.mark.chain


def test_chain_time_ignores_the_wall_clock(tmp_path, monkeypatch):
    chain = EmbeddedChain(ModelStore(tmp_path), backend=BACKEND)
    start = chain.timestamp()
    wall = int(time.time())
    monkeypatch.setattr(headers, "eth_now", lambda: wall + 10_000)  # py-evm's clock: a very slow step
    chain.mine()
    assert chain.timestamp() == start + BLOCK_TIME
    chain.advance_time(50)  # the target is computed from the latest block, before the next one is made
    chain.mine()
    assert chain.timestamp() == start + BLOCK_TIME + 50
    with pytest.raises(ValueError):
        chain.advance_time(0)
