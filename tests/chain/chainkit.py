"""Helpers for the chain tests: a tiny real CVM model, an embedded chain, a deployed oracle."""

from __future__ import annotations

import importlib.util
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import cvm
from cvm.chain.contracts import (
    Deployment, OracleConfig, TxFailed, call_struct, deploy, deploy_oracle, register_model, send,
)
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.node import commitment
from cvm.chain.store import ModelStore

HERE = Path(__file__).parent
TEST_ARTIFACTS = HERE / "artifacts"
ROOT = HERE.parents[1]
# the operators' backend; CVM_CHAIN_TEST_BACKEND=reference overrides it
BACKEND = os.environ.get("CVM_CHAIN_TEST_BACKEND") or (
    "numba" if importlib.util.find_spec("cvm.interp.numba") else "reference")
CONFIG = OracleConfig(quorum=2, committee_size=3, min_stake=10**18, slash_amount=4 * 10**17,
                      min_fee=10**15, commit_window=100, reveal_window=100, withdrawal_delay=3000,
                      max_challenge_window=1000, dispute_move_time=50, callback_gas_limit=200_000)
NO_TRACE = bytes(32)  # the trace root of tests that never dispute


def tiny_model(meta: dict | None = None) -> cvm.Model:
    """4 int8 inputs -> 3 logits: a dense layer, small enough to reason about."""
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=8)
    w = b.const([[1, 2, 3, 4], [-1, 0, 1, 0], [5, -5, 5, -5]], "w", "int8")
    bias = b.const([10, -10, 0], "b", "int32")
    return b.build(b.op("dense", x, w, bias, name="logits"), meta)


def past_commit_deadline(w3, oracle, rid: int) -> None:
    """Moves the chain (embedded or anvil) past an InferenceOracle request's commit deadline, where its
    reveal phase opens: seats are drawn until then."""
    chain_past(w3, oracle.functions.getRequest(rid).call()[2])


def chain_past(w3, deadline: int) -> None:
    """Mines a block later than `deadline` (embedded chain or anvil), unless the latest one is."""
    if w3.eth.get_block("latest")["timestamp"] > deadline:
        return
    tester = getattr(w3.provider, "ethereum_tester", None)
    if tester is not None:
        tester.time_travel(deadline + 2)  # eth-tester's latest block is then one second before: deadline + 1
    else:
        w3.provider.make_request("evm_setNextBlockTimestamp", [deadline + 1])
        w3.provider.make_request("evm_mine", [])


@contextmanager
def reverts(error: str):
    """Expects a transaction to revert with the named custom error."""
    with pytest.raises(TxFailed) as info:
        yield info
    assert info.value.error == error, f"expected {error}, got {info.value}"


@dataclass
class Env:
    chain: EmbeddedChain
    store: ModelStore
    model: cvm.Model
    dep: Deployment
    config: OracleConfig
    outputs: dict = field(default_factory=dict)  # request id -> its true output bytes (Env.request)

    @property
    def w3(self):
        return self.chain.w3

    @property
    def oracle(self):
        return self.dep.oracle

    @property
    def registry(self):
        return self.dep.registry

    @property
    def fee(self) -> int:
        """The least fee a request for the test model pays (oracle.feeFor)."""
        return self.oracle.functions.feeFor(self.model.hash).call()

    @property
    def deployer(self):
        return self.chain.keys[0]

    @property
    def operators(self):
        return self.chain.keys[1:5]

    @property
    def player(self):
        return self.chain.keys[6]

    def send(self, account, call, **kw):
        return send(self.w3, account, call, **kw)

    def register(self, author, model_hash, uri, inp, out, gas, calibration, salt=None, registry=None):
        """ModelRegistry's two steps: commitRegistration, then register in a later block."""
        reg, salt = registry or self.registry, salt or os.urandom(32)
        self.send(author, reg.functions.commitRegistration(
            reg.functions.registrationCommitment(model_hash, author.address, salt).call()))
        return self.send(author, reg.functions.register(model_hash, uri, inp, out, gas, calibration, salt))

    def deploy_test(self, name, *args, **kw):
        return deploy(self.w3, self.deployer, name, *args, directory=TEST_ARTIFACTS, **kw)

    def stake_all(self, count: int = 3):
        for op in self.operators[:count]:
            self.send(op, self.oracle.functions.stake(), value=self.config.min_stake)

    def sample(self, seed: int = 0) -> tuple[bytes, np.ndarray]:
        x = np.random.default_rng(seed).integers(-127, 128, (1, 4)).astype(np.int8)
        return self.model.encode_input(x), self.model.run(x, backend=BACKEND)

    def request(self, input_bytes: bytes, callback: str | None = None, value: int | None = None,
                window: int | None = None) -> int:
        """A request (`window`: requestWithWindow's, else `request` and its default window)."""
        callback = callback or self.player.address
        call = (self.oracle.functions.request(self.model.hash, input_bytes, callback) if window is None else
                self.oracle.functions.requestWithWindow(self.model.hash, input_bytes, callback, window))
        r = self.send(self.player, call, value=self.fee if value is None else value)
        return self.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]

    def output_of(self, rid: int) -> bytes:
        """The request's true output bytes (the reference run of its input, from its event)."""
        if rid not in self.outputs:
            ev = self.oracle.events.InferenceRequested().get_logs(from_block=0, argument_filters={"requestId": rid})
            x = self.model.decode_input(bytes(ev[0]["args"]["input"])) if ev else None
            self.outputs[rid] = b"" if x is None else self.model.encode_output(self.model.run(x, backend="reference"))
        return self.outputs[rid]

    def commit(self, op, rid: int, out_hash: bytes, salt: bytes, root: bytes = NO_TRACE, output: bytes | None = None):
        """Commits to (out_hash, output, root); output: the request's true output bytes unless given."""
        output = self.output_of(rid) if output is None else output
        return self.send(op, self.oracle.functions.commit(rid, commitment(rid, out_hash, root, salt, op.address, output)))

    def open_reveals(self, rid: int) -> None:
        """Moves the chain past the request's commit deadline, where its reveal phase opens."""
        past_commit_deadline(self.w3, self.oracle, rid)

    def reveal(self, op, rid: int, out_hash: bytes, salt: bytes, output: bytes, root: bytes = NO_TRACE,
               open_phase: bool = True, **kw):
        """Reveals, moving the chain past the commit deadline first (open_phase=False: as it is)."""
        if open_phase:
            self.open_reveals(rid)
        return self.send(op, self.oracle.functions.reveal(rid, out_hash, root, salt, output), **kw)

    def request_state(self, rid: int) -> dict:
        return call_struct(self.oracle.functions.getRequest(rid))

    def stake_of(self, op) -> int:
        return self.oracle.functions.operators(op.address).call()[0]

    def claimable(self, address: str) -> int:
        return self.oracle.functions.claimable(address).call()


def make_env(tmp_path: Path, config: OracleConfig = CONFIG, model: cvm.Model | None = None,
             num_accounts: int = 10) -> Env:
    store = ModelStore(tmp_path / "models")
    model = store.get(store.put(model or tiny_model()))
    chain = EmbeddedChain(store, backend=BACKEND, num_accounts=num_accounts)
    dep = deploy_oracle(chain.w3, chain.keys[0], config)
    register_model(dep.registry, chain.keys[0], model)
    return Env(chain, store, model, dep, config)
