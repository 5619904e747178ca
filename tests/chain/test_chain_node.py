"""The node operator against the embedded chain: consensus, crash recovery at each point of a
request's life, retries of failed submissions, and a dishonest operator being slashed."""

import logging
import sqlite3

import pytest
from chainkit import BACKEND

import cvm
from cvm.chain import node as node_module
from cvm.chain.node import Operator, Status
from cvm.chain.sender import Sender
from cvm.chain.store import ModelStore

pytestmark = pytest.mark.chain


class Crash(BaseException):
    """Stands for the process being killed: nothing in the operator catches it."""


def make_operator(env, tmp_path, i, cls=Operator, retry_delay=0.0):
    return cls(env.w3, env.operators[i], env.oracle.address, env.store, tmp_path / f"op{i}.sqlite",
               backend=BACKEND, retry_delay=retry_delay)


def run_until_final(env, operators, rid, rounds=6):
    """Steps every operator, then moves the chain past the commit deadline (seats are drawn until
    then, reveals open after it), until the request is no longer pending."""
    for _ in range(rounds):
        for op in operators:
            op.step()
        if env.request_state(rid)["status"] != Status.PENDING:
            break
        env.open_reveals(rid)
    return env.request_state(rid)


def tx_count(env, i):
    return env.w3.eth.get_transaction_count(env.operators[i].address)


def crash_on(monkeypatch, function_name, after_sending):
    """Makes the operator die when its next `function_name` transaction, signed and stored, is
    broadcast: before the node has it, or after."""
    real = Sender._broadcast

    def crashing_broadcast(self, tx, raw):
        if tx.kind == function_name:
            monkeypatch.setattr(Sender, "_broadcast", real)  # once
            if after_sending:
                real(self, tx, raw)
            raise Crash(function_name)
        return real(self, tx, raw)

    monkeypatch.setattr(Sender, "_broadcast", crashing_broadcast)


def test_three_operators_reach_consensus(env, tmp_path):
    env.stake_all()
    data, y = env.sample()
    rid = env.request(data)
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    state = run_until_final(env, ops, rid)
    assert state["status"] == Status.FINALIZED
    assert bytes(state["outputHash"]) == cvm.output_hash(y)
    for op in ops:
        op.step()
        job = op.job(rid)
        assert job.state == "done" and job.note == "finalised with our output"


@pytest.mark.parametrize("function_name,after_sending", [
    ("commit", False), ("commit", True), ("reveal", False), ("reveal", True)])
def test_restart_after_a_crash_loses_nothing_and_sends_nothing_twice(env, tmp_path, monkeypatch,
                                                                      function_name, after_sending):
    env.stake_all()
    data, y = env.sample(1)
    rid = env.request(data)
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    for op in ops[1:]:
        op.step()  # two commit; neither can reveal before the commit deadline

    crash_on(monkeypatch, function_name, after_sending)
    with pytest.raises(Crash):
        for _ in range(3):
            ops[0].step()
            env.open_reveals(rid)  # after its commit: the reveal phase
    salt = ops[0].job(rid).salt
    assert salt is not None  # stored before any commit was sent
    ops[0].db.close()

    restarted = make_operator(env, tmp_path, 0)
    assert restarted.job(rid).salt == salt
    state = run_until_final(env, [restarted, *ops[1:]], rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == cvm.output_hash(y)
    for _ in range(2):
        restarted.step()
    assert restarted.job(rid).state == "done"
    assert tx_count(env, 0) == 1 + 2  # stake, one commit, one reveal
    assert env.oracle.functions.getSubmission(rid, env.operators[0].address).call()[1] != bytes(32)


def test_failed_submissions_are_retried_with_logs(env, tmp_path, monkeypatch, caplog):
    """A broadcast that fails is sent again (the same signed bytes: no second transaction); a
    transaction that reverts is logged and its step retried."""
    env.stake_all()
    data, _ = env.sample(2)
    rid = env.request(data)
    op = make_operator(env, tmp_path, 0, retry_delay=3600.0)
    real_broadcast = env.w3.eth.send_raw_transaction
    failures = iter([ConnectionError("node unreachable")])

    def flaky_broadcast(raw):
        error = next(failures, None)
        if error:
            raise error
        return real_broadcast(raw)

    monkeypatch.setattr(env.w3.eth, "send_raw_transaction", flaky_broadcast)
    monkeypatch.setattr(node_module, "COMMIT_GAS", 30_000)  # runs out of gas: the commit reverts
    with caplog.at_level(logging.WARNING):
        op.step()  # signed, broadcast fails: in flight, not yet at the node
        assert op.job(rid).state == "seen" and len(op.sender.in_flight(rid)) == 1
        op.step()  # sent again, mined, reverted: retried
    assert op.job(rid).attempts == 1 and op.job(rid).state == "seen"
    assert "node unreachable" in caplog.text and "(failure 1)" in caplog.text and "commit transaction" in caplog.text
    monkeypatch.setattr(node_module, "COMMIT_GAS", 300_000)
    op.retry_delay, op._retry_at = 0.0, {}
    op.step()
    assert op.job(rid).state == "committed"
    assert tx_count(env, 0) == 1 + 2  # stake, the reverted commit (broadcast twice, mined once), the commit


def test_retries_back_off_until_the_deadline_ends_them(env, tmp_path, monkeypatch):
    env.stake_all()
    data, _ = env.sample(3)
    rid = env.request(data)
    op = make_operator(env, tmp_path, 0, retry_delay=3600.0)
    calls = []

    def broken_read(job):
        calls.append(1)
        raise ConnectionError("down")

    monkeypatch.setattr(op, "_read_chain", broken_read)
    for _ in range(3):
        op.step()
    assert len(calls) == 1 and op.job(rid).attempts == 1  # waiting out its backoff
    op.retry_delay, op._retry_at = 0.0, {}
    op.step()
    assert len(calls) == 2 and op.job(rid).state == "seen"
    monkeypatch.undo()
    env.chain.advance_time(env.config.commit_window + 1)
    op.step()
    assert op.job(rid).state == "done" and op.job(rid).note.startswith("commit phase closed")


def test_requests_are_pipelined(env, tmp_path):
    """With mining paused, one step sends a commit for every request, each with its own nonce, and
    waits for none of them; a killed node restarted before the block is mined resends nothing new;
    once mined, the receipts come in together and every request moves on."""
    for op in env.operators[:3]:  # a bond per request in flight: five of them
        env.send(op, env.oracle.functions.stake(), value=3 * env.config.min_stake)
    rids = [env.request(env.sample(10 + i)[0]) for i in range(5)]
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    env.chain.tester.disable_auto_mine_transactions()
    try:
        ops[0].step()
        flying = ops[0].sender.in_flight()
        assert sorted(t.request_id for t in flying) == rids and {t.kind for t in flying} == {"commit"}
        assert [t.nonce for t in flying] == list(range(1, 6))  # after the stake
        assert all(ops[0].job(r).state == "seen" for r in rids)
        ops[0].db.close()
        ops[0] = make_operator(env, tmp_path, 0)  # restarted with five commits in flight
        for op in ops:
            op.step()
        assert len(ops[0].sender.in_flight()) == 5  # none sent twice
        env.chain.tester.mine_blocks(1)
    finally:
        env.chain.tester.enable_auto_mine_transactions()
    for _ in range(4):
        for op in ops:
            op.step()
        for rid in rids:
            env.open_reveals(rid)
    for rid in rids:
        state = env.request_state(rid)
        assert state["status"] == Status.FINALIZED and state["reveals"] == 3
    assert tx_count(env, 0) == 1 + 2 * len(rids)


def test_dishonest_operator_is_slashed(env, tmp_path):
    class Liar(Operator):
        def _compute(self, job):
            ok = super()._compute(job)
            y = self.store.get(job.model_hash).decode_output(job.output) + 1
            self._update(job, output=self.store.get(job.model_hash).encode_output(y), output_hash=cvm.output_hash(y))
            return ok

    env.stake_all()
    data, y = env.sample(4)
    rid = env.request(data)
    liar = make_operator(env, tmp_path, 0, Liar)
    ops = [liar, make_operator(env, tmp_path, 1), make_operator(env, tmp_path, 2)]
    state = run_until_final(env, ops, rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == cvm.output_hash(y)
    # the honest nodes disputed the liar's vote (same trace root, other output): it was refuted and slashed
    assert env.stake_of(env.operators[0]) == env.config.min_stake - env.config.slash_amount
    assert env.oracle.events.VoteRefuted().get_logs(from_block=0)
    env.chain.advance_time(env.config.commit_window + env.config.reveal_window + 1)
    liar.step()  # settles the request (its own bond was taken)
    assert liar.job(rid).state == "done" and liar.job(rid).note.startswith("finalised with another output")


def test_a_database_belongs_to_one_operator(env, tmp_path):
    make_operator(env, tmp_path, 0).db.close()
    (tmp_path / "op1.sqlite").write_bytes((tmp_path / "op0.sqlite").read_bytes())
    with pytest.raises(ValueError, match="belongs to operator"):
        make_operator(env, tmp_path, 1)


def test_unknown_model_is_given_up(env, tmp_path):
    env.stake_all()
    data, _ = env.sample()
    rid = env.request(data)
    op = Operator(env.w3, env.operators[0], env.oracle.address, ModelStore(tmp_path / "empty"),
                  tmp_path / "op0.sqlite", backend=BACKEND)
    op.step()
    job = op.job(rid)
    assert job.state == "done" and "cannot run model" in job.note
    assert sqlite3.connect(tmp_path / "op0.sqlite").execute("SELECT salt FROM requests").fetchone() == (None,)


def test_a_reorg_that_drops_commit_and_reveal_is_repaired(env, tmp_path):
    """eth-tester's snapshots stand for a reorg: the blocks with the operator's commit (then its
    reveal) vanish. The operator notices on its next step and sends them again, with the same salt."""
    env.stake_all()
    data, y = env.sample()
    rid = env.request(data)
    before_commit = env.chain.tester.take_snapshot()
    ops = [make_operator(env, tmp_path, i) for i in range(3)]
    ops[0].step()
    first = env.oracle.functions.getSubmission(rid, env.operators[0].address).call()[0]
    env.chain.tester.revert_to_snapshot(before_commit)
    assert env.request_state(rid)["commits"] == 0
    ops[0].step()
    job = ops[0].job(rid)
    assert job.state == "committed"
    assert env.oracle.functions.getSubmission(rid, env.operators[0].address).call()[0] == first  # same salt
    for op in ops[1:]:
        op.step()
    env.open_reveals(rid)  # past the commit deadline: the reveal phase opens
    ops[0].step()
    assert ops[0].job(rid).state == "revealed"
    env.chain.tester.revert_to_snapshot(before_commit)  # commits and reveal all gone
    state = run_until_final(env, ops, rid)
    assert state["status"] == Status.FINALIZED and bytes(state["outputHash"]) == cvm.output_hash(y)


def test_requests_wait_for_confirmations(env, tmp_path):
    env.stake_all()
    rid = env.request(env.sample()[0])
    op = Operator(env.w3, env.operators[0], env.oracle.address, env.store, tmp_path / "op0.sqlite",
                  backend=BACKEND, confirmations=2)
    op.step()
    assert op.job(rid) is None  # its block has no confirmations yet
    for _ in range(2):
        env.chain.tester.mine_blocks(1)
    op.step()
    assert op.job(rid).state == "committed"


def test_a_model_registered_below_its_gas_is_not_served(env, tmp_path):
    """The fee is priced from the registered gas: an author who registers less than the model's
    static cost gets no operator to work below cost (the request expires and is refunded)."""
    from cvm.chain.contracts import tensor_spec
    b = cvm.GraphBuilder()
    x = b.input("x", (4,), bits=8)
    model = env.store.get(env.store.put(b.build(b.op("dense", x, b.const([[1, 1, 1, 1]], "w", "int8")))))
    env.register(env.deployer, model.hash, "cvm:cheap", tensor_spec(model.inputs[0]), tensor_spec(model.outputs[0]),
                 1, bytes(32))
    env.stake_all()
    call = env.oracle.functions.request(model.hash, env.sample()[0], env.player.address)
    r = env.send(env.player, call, value=env.oracle.functions.feeFor(model.hash).call())
    rid = env.oracle.events.InferenceRequested().process_receipt(r)[0]["args"]["requestId"]
    op = make_operator(env, tmp_path, 0)
    op.step()
    job = op.job(rid)
    assert job.state == "done" and f"registered with gas 1, but its static cost is {model.gas}" in job.note
    assert env.request_state(rid)["commits"] == 0


def test_operator_settles_an_unfinished_request(env, tmp_path, salts):
    """One vote of k=2 and a committee member that never reveals: after the reveal deadline the
    operator settles, which refunds the requester and slashes the silent one."""
    env.stake_all()
    data, y = env.sample(5)
    rid = env.request(data)
    op = make_operator(env, tmp_path, 0)
    op.step()
    env.commit(env.operators[1], rid, cvm.output_hash(y), salts[1])  # commits, never reveals
    env.chain.advance_time(env.config.commit_window + 1)
    op.step()
    assert op.job(rid).state == "revealed"
    env.chain.advance_time(env.config.reveal_window + 1)
    op.step()
    job = op.job(rid)
    assert job.state == "done" and job.note == "expired without a result"
    state = env.request_state(rid)
    assert state["status"] == Status.EXPIRED and state["settled"]
    assert env.claimable(env.player.address) == env.fee
    assert env.stake_of(env.operators[1]) == env.config.min_stake - env.config.slash_amount
    assert env.stake_of(env.operators[0]) == env.config.min_stake
