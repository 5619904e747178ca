"""Containment of failures on chain: whatever a model file or a run raises (MemoryError,
OverflowError, RecursionError, a malformed file the loader trips over, a bug), the precompile
fails cleanly (a revert that consumes the call's gas), the store raises only StoreError and keeps
its caches bounded, and the node operator refuses the request once and goes on serving others."""

import logging
import os
import shutil
import threading

import msgpack
import numpy as np
import pytest
from chainkit import BACKEND, ROOT, TEST_ARTIFACTS
from web3 import Web3

import cvm
from cvm.chain.contracts import REVERT_ERRORS, deploy, register_model
from cvm.chain.node import Operator, Status
from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS
from cvm.chain.store import ModelStore, StoreError

pytestmark = pytest.mark.chain

PRECOMPILE = Web3.to_checksum_address(CVM_PRECOMPILE_ADDRESS)
TINY_CNN = ROOT / "fixtures/cvm/tiny_cnn.cvm"
RUN_FAILURES = {
    "OverflowError": lambda: OverflowError("Python int too large to convert to C long"),
    "MemoryError": lambda: MemoryError(),
    "RecursionError": lambda: RecursionError("maximum recursion depth exceeded"),
    "a bug": lambda: KeyError("a bug in a backend"),
}


def dense_model(seed: int) -> cvm.Model:
    """Like chainkit.tiny_model (4 int8 inputs -> 3 logits) with other weights: another hash."""
    rng = np.random.default_rng(seed)
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=8)
    w = b.const(rng.integers(-5, 6, (3, 4)).astype(np.int8), "w", "int8")
    bias = b.const(rng.integers(-10, 11, 3).astype(np.int32), "b", "int32")
    return b.build(b.op("dense", x, w, bias, name="logits"))


def corrupt_files(model: cvm.Model) -> dict[str, bytes]:
    """Files that are not `model` although they may be stored under its name."""
    data = model.to_bytes()
    graph = msgpack.unpackb(data, raw=False)["graph"]
    return {
        # sorted() of the keys meets bytes and str: a TypeError in the loader
        "bytes keys": msgpack.packb({"format": "cvm", "graph": graph, "meta": {}, b"x": 1}, use_bin_type=True),
        # the scales are not a map: an AttributeError in Model.__init__
        "malformed meta": msgpack.packb({"format": "cvm", "graph": graph, "meta": {"input_scales": 5}},
                                        use_bin_type=True),
        "truncated": data[: len(data) // 2],
        "empty": b"",
        "wrong hash": TINY_CNN.read_bytes(),  # a valid model, but another one
    }


CORRUPT = list(corrupt_files(dense_model(0)))


def send_to_precompile(env, data: bytes, gas: int) -> dict:
    """A plain transaction to the precompile; returns the receipt whatever its status."""
    sender = env.player
    tx = {"to": PRECOMPILE, "data": data, "gas": gas, "value": 0, "chainId": env.w3.eth.chain_id,
          "nonce": env.w3.eth.get_transaction_count(sender.address), "maxFeePerGas": 10**10,
          "maxPriorityFeePerGas": 1}
    tx_hash = env.w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction)
    return env.w3.eth.wait_for_transaction_receipt(tx_hash)


def assert_fails_consuming_gas(env, data: bytes, gas: int = 500_000) -> str:
    """The call reverts with all its gas consumed, as a transaction and as eth_call; returns the
    eth_call error text."""
    nonce = env.w3.eth.get_transaction_count(env.player.address)
    r = send_to_precompile(env, data, gas)
    assert r["status"] == 0 and r["gasUsed"] == gas
    assert env.w3.eth.get_transaction_count(env.player.address) == nonce + 1  # included
    with pytest.raises(REVERT_ERRORS) as e:
        env.w3.eth.call({"to": PRECOMPILE, "data": data})
    return str(e.value)


def assert_good_call(env, model: cvm.Model, x: np.ndarray) -> None:
    data = model.hash + model.encode_input(x)
    expected = model.encode_output(model.run(x, backend="reference"))
    assert bytes(env.w3.eth.call({"to": PRECOMPILE, "data": data})) == expected
    assert send_to_precompile(env, data, 500_000)["status"] == 1


def failing_run(monkeypatch, bad_hash: bytes, make_error, active: threading.Event | None = None):
    """Model.run raises make_error() for the model `bad_hash` (while `active` is set)."""
    run = cvm.Model.run

    def patched(self, *args, **kw):
        if self.hash == bad_hash and (active is None or active.is_set()):
            raise make_error()
        return run(self, *args, **kw)

    monkeypatch.setattr(cvm.Model, "run", patched)


def sample(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-127, 128, (1, 4)).astype(np.int8)


# ---------------------------------------------------------------- the precompile


@pytest.mark.parametrize("failure", list(RUN_FAILURES))
def test_a_run_that_raises_reverts_and_the_next_call_succeeds(env, monkeypatch, caplog, failure):
    bad = env.store.get(env.store.put(dense_model(1)))
    active = threading.Event()
    active.set()
    failing_run(monkeypatch, bad.hash, RUN_FAILURES[failure], active)
    x = sample()
    with caplog.at_level(logging.WARNING, logger="cvm.chain.precompile"):
        assert_fails_consuming_gas(env, bad.hash + bad.encode_input(x))
    assert bad.hash.hex() in caplog.text and type(RUN_FAILURES[failure]()).__name__ in caplog.text
    assert_good_call(env, env.model, x)  # the next transaction, another model
    active.clear()
    assert_good_call(env, bad, x)  # the same model once its run works: nothing was left broken


def test_the_revert_is_the_same_whatever_was_raised(env, monkeypatch):
    bad = env.store.get(env.store.put(dense_model(1)))
    data = bad.hash + bad.encode_input(sample())
    texts = set()
    for make_error in RUN_FAILURES.values():
        monkeypatch.undo()
        failing_run(monkeypatch, bad.hash, make_error)
        texts.add(assert_fails_consuming_gas(env, data))
    assert len(texts) == 1  # no exception text reaches the chain


def test_a_calling_contract_sees_false_and_goes_on(env, monkeypatch):
    bad = env.store.get(env.store.put(dense_model(1)))
    failing_run(monkeypatch, bad.hash, RUN_FAILURES["MemoryError"])
    caller, _ = deploy(env.w3, env.deployer, "PrecompileCaller", directory=TEST_ARTIFACTS)
    x = sample()
    r = env.send(env.player, caller.functions.callRaw(bad.hash + bad.encode_input(x), 100_000), gas=400_000)
    assert r["status"] == 1 and r["gasUsed"] > 100_000
    assert caller.functions.lastOk().call() is False
    env.send(env.player, caller.functions.callRaw(env.model.hash + env.model.encode_input(x), 100_000), gas=400_000)
    assert caller.functions.lastOk().call() is True


@pytest.mark.parametrize("case", CORRUPT)
def test_a_corrupt_store_file_reverts(env, caplog, case):
    model = dense_model(2)
    env.store.path(model.hash).write_bytes(corrupt_files(model)[case])
    with pytest.raises(StoreError):
        ModelStore(env.store.directory).get(model.hash)
    with caplog.at_level(logging.WARNING, logger="cvm.chain.precompile"):
        assert_fails_consuming_gas(env, model.hash + model.encode_input(sample()))
    assert model.hash.hex() in caplog.text
    assert_good_call(env, env.model, sample())


# ---------------------------------------------------------------- the store


@pytest.mark.parametrize("case", CORRUPT)
def test_store_get_raises_only_store_error_and_remembers_bad_files(tmp_path, monkeypatch, case):
    model = dense_model(3)
    store = ModelStore(tmp_path)
    store.path(model.hash).write_bytes(corrupt_files(model)[case])
    with pytest.raises(StoreError):
        store.get(model.hash)
    loads = []
    real_loads = cvm.loads
    monkeypatch.setattr(cvm, "loads", lambda data: loads.append(1) or real_loads(data))
    with pytest.raises(StoreError):
        store.get(model.hash)
    assert loads == []  # remembered as bad: not parsed again
    assert store.put(model) == model.hash  # put replaces the bad file...
    assert store.get(model.hash).hash == model.hash
    assert ModelStore(tmp_path).get(model.hash).hash == model.hash  # ...on disk too


def test_a_replaced_file_is_read_again(tmp_path):
    model = dense_model(3)
    store = ModelStore(tmp_path)
    store.path(model.hash).write_bytes(b"junk")
    with pytest.raises(StoreError):
        store.get(model.hash)
    store.path(model.hash).write_bytes(model.to_bytes())  # repaired by hand
    assert store.get(model.hash).hash == model.hash


def test_store_get_never_lets_a_loader_failure_out(tmp_path, monkeypatch):
    model = dense_model(4)
    store = ModelStore(tmp_path)
    store.put(model)

    def broken(data):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(cvm, "loads", broken)
    with pytest.raises(StoreError, match="RecursionError"):
        ModelStore(tmp_path).get(model.hash)


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_a_failed_put_leaves_no_temporary_file(tmp_path, monkeypatch, failing):
    store = ModelStore(tmp_path)
    model = dense_model(5)

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, full_disk)
    with pytest.raises(OSError):
        store.put(model)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    store.put(model)
    assert [p.name for p in tmp_path.iterdir()] == [f"{model.hash.hex()}.cvm"]


def test_store_caches_stay_within_their_bounds(tmp_path, monkeypatch):
    models = [dense_model(10 + i) for i in range(6)]
    size = len(models[0].to_bytes())
    assert all(len(m.to_bytes()) == size for m in models)
    writer = ModelStore(tmp_path / "m")
    for m in models:
        writer.put(m)

    store = ModelStore(tmp_path / "m", cache_models=3, cache_bytes=10 * size, bad_models=2)
    for m in models:
        assert store.get(m.hash).hash == m.hash
        info = store.cache_info()
        assert info["models"] <= 3 and info["bytes"] <= 10 * size
    assert store.cache_info() == {"models": 3, "bytes": 3 * size, "bad": 0}

    loads = []
    real_loads = cvm.loads
    monkeypatch.setattr(cvm, "loads", lambda data: loads.append(1) or real_loads(data))
    store.get(models[3].hash)  # cached: now the most recently used
    store.get(models[0].hash)  # evicted long ago: loaded again, evicts models[4]
    assert len(loads) == 1
    store.get(models[3].hash)
    store.get(models[5].hash)
    assert len(loads) == 1
    store.get(models[4].hash)
    assert len(loads) == 2

    by_bytes = ModelStore(tmp_path / "m", cache_models=100, cache_bytes=2 * size)
    for m in models:
        by_bytes.get(m.hash)
    assert by_bytes.cache_info()["models"] == 2 and by_bytes.cache_info()["bytes"] == 2 * size
    too_small = ModelStore(tmp_path / "m", cache_bytes=size - 1)  # no model fits: none is cached
    assert too_small.get(models[0].hash).hash == models[0].hash
    assert too_small.cache_info()["models"] == 0

    for i in range(5):
        store.path(bytes([0xB0 + i]) * 32).write_bytes(b"junk")
        with pytest.raises(StoreError):
            store.get(bytes([0xB0 + i]) * 32)
        assert store.cache_info()["bad"] <= 2
    assert store.cache_info()["bad"] == 2


# ---------------------------------------------------------------- the node operator


def make_operator(env, db_dir, i, store=None, retry_delay=0.0):
    return Operator(env.w3, env.operators[i], env.oracle.address, store or env.store, db_dir / f"op{i}.sqlite",
                    backend=BACKEND, retry_delay=retry_delay)


def request(env, model: cvm.Model, x: np.ndarray) -> int:
    call = env.oracle.functions.request(model.hash, model.encode_input(x), env.player.address)
    r = env.send(env.player, call, value=env.oracle.functions.feeFor(model.hash).call())
    return env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]


def run_until_final(env, operators, rid, rounds=6):
    """Steps the operators, moving the chain past the commit deadline after each pass, until the
    request is decided."""
    for _ in range(rounds):
        for op in operators:
            op.step()
        if env.request_state(rid)["status"] != Status.PENDING:
            break
        env.open_reveals(rid)
    return env.request_state(rid)


def error_records(caplog, rid):
    return [r for r in caplog.records if r.levelno >= logging.ERROR and f"request {rid}:" in r.getMessage()]


def check_refusal_and_recovery(env, tmp_path, caplog, make_ops, bad: cvm.Model):
    """A request for `bad` is refused once by every operator, nothing is committed for it, and a
    later good request finalises, before and after a restart of every operator."""
    env.stake_all()
    x = sample(7)
    rid_bad = request(env, bad, x)
    rid_good = request(env, env.model, x)
    ops = make_ops()
    with caplog.at_level(logging.INFO, logger="cvm.node"):
        state = run_until_final(env, ops, rid_good)
        for op in ops:
            op.step()
    assert state["status"] == Status.FINALIZED
    assert bytes(state["outputHash"]) == cvm.output_hash(env.model.run(x, backend="reference"))
    assert env.request_state(rid_bad)["commits"] == 0
    for op in ops:
        job = op.job(rid_bad)
        assert job.state == "done" and job.note.startswith("refused: cannot run model")
        assert job.salt is None and job.commit_tx is None and job.output_hash is None
        sub = env.oracle.functions.getSubmission(rid_bad, op.account.address).call()
        assert bytes(sub[0]) == bytes(32)
    assert len(error_records(caplog, rid_bad)) == len(ops)  # once per operator

    for op in ops:
        op.db.close()
    caplog.clear()
    restarted = make_ops()
    rid_later = request(env, env.model, sample(8))
    with caplog.at_level(logging.INFO, logger="cvm.node"):
        state = run_until_final(env, restarted, rid_later)
    assert state["status"] == Status.FINALIZED
    assert error_records(caplog, rid_bad) == []
    assert all(op.job(rid_bad).state == "done" for op in restarted)
    assert env.request_state(rid_bad)["commits"] == 0


@pytest.mark.parametrize("failure", ["OverflowError", "MemoryError"])
def test_node_refuses_a_model_whose_run_raises(env, tmp_path, monkeypatch, caplog, failure):
    bad = env.store.get(env.store.put(dense_model(20)))
    register_model(env.registry, env.deployer, bad)
    failing_run(monkeypatch, bad.hash, RUN_FAILURES[failure])
    check_refusal_and_recovery(env, tmp_path, caplog, lambda: [make_operator(env, tmp_path, i) for i in range(3)],
                               bad)


@pytest.mark.parametrize("case", ["bytes keys", "truncated", "wrong hash"])
def test_node_refuses_a_model_whose_file_is_corrupt(env, tmp_path, caplog, case):
    bad = dense_model(21)
    register_model(env.registry, env.deployer, bad)
    stores = []
    for i in range(3):
        store = ModelStore(tmp_path / f"store{i}")
        store.put(env.model)
        store.path(bad.hash).write_bytes(corrupt_files(bad)[case])
        stores.append(store)
    check_refusal_and_recovery(
        env, tmp_path, caplog, lambda: [make_operator(env, tmp_path, i, stores[i]) for i in range(3)], bad)


def test_a_bug_in_one_request_does_not_stop_the_others(env, tmp_path, monkeypatch, caplog):
    env.stake_all()
    rid_a = request(env, env.model, sample(9))
    rid_b = request(env, env.model, sample(10))
    advance = Operator.advance
    broken = threading.Event()
    broken.set()

    def buggy_advance(self, job):
        if job.request_id == rid_a and broken.is_set():
            raise ZeroDivisionError("a bug")
        return advance(self, job)

    monkeypatch.setattr(Operator, "advance", buggy_advance)
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="cvm.node"):
        for _ in range(2):  # within the commit window: b commits, a fails and is retried
            for op in ops:
                op.step()
    for op in ops:
        assert op.job(rid_b).state == "committed"
        assert op.job(rid_a).state == "seen" and op.job(rid_a).attempts >= 2  # retried with backoff
    tracebacks = [r for r in caplog.records if r.exc_info and f"request {rid_a}:" in r.getMessage()]
    assert len(tracebacks) == len(ops)  # once per operator, however often it failed
    assert "ZeroDivisionError: a bug" in caplog.text

    broken.clear()  # fixed: the request goes on where it was
    for op in ops:
        op.step()
    assert run_until_final(env, ops, rid_b)["status"] == Status.FINALIZED
    assert run_until_final(env, ops, rid_a)["status"] == Status.FINALIZED


def test_the_loop_survives_a_failing_step(env, tmp_path, monkeypatch, caplog):
    op = make_operator(env, tmp_path, 0)
    stop = threading.Event()
    calls = []

    def failing_step():
        calls.append(1)
        if len(calls) >= 4:
            stop.set()
        raise RuntimeError("a bug in step")

    monkeypatch.setattr(op, "step", failing_step)
    with caplog.at_level(logging.ERROR, logger="cvm.node"):
        op.run(poll_interval=0.0, stop=stop)
    assert len(calls) == 4
    assert sum(1 for r in caplog.records if r.exc_info) == 1  # the same failure: one traceback


def test_the_store_directory_may_hold_stray_files(tmp_path):
    store = ModelStore(tmp_path)
    h = store.put(TINY_CNN)
    (tmp_path / "notes.cvm").write_text("not a hash")
    (tmp_path / ("ab" * 32 + ".cvm")).mkdir()  # a directory named like a model
    with pytest.raises(StoreError):
        store.get("ab" * 32)
    shutil.copy(TINY_CNN, tmp_path / "x.tmp")
    assert store.hashes() == sorted([h, bytes.fromhex("ab" * 32)])


def test_a_failing_scan_does_not_stop_known_requests(env, tmp_path, monkeypatch, caplog):
    env.stake_all()
    rid = request(env, env.model, sample(11))
    op = make_operator(env, tmp_path, 0)
    op.scan()  # the request is known

    def broken_scan():
        raise ValueError("a malformed event")

    monkeypatch.setattr(op, "scan", broken_scan)
    with caplog.at_level(logging.ERROR, logger="cvm.node"):
        op.step()
        op.step()
    assert op.job(rid).state == "committed"
    assert sum(1 for r in caplog.records if r.exc_info) == 1
