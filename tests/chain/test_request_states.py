"""The request-state table (cvm/chain/states.py) against what it mirrors: the node's SQLite schema and
InferenceOracle.sol (its Status enum, the statuses it assigns, the status checks of the functions the
node calls), so that none of them can drift from the others."""
import re
import sqlite3
from pathlib import Path

import pytest

from cvm.chain import node, protocol, states
from cvm.chain.states import DONE, FINAL, INITIAL, SEEN, STATES, STATUS_TRANSITIONS, TRANSITIONS, Status

ORACLE = Path(__file__).parents[2] / "contracts" / "src" / "InferenceOracle.sol"
GUARD = re.compile(r"\b\w+\.status\s*(==|!=)\s*Status\.(\w+)\s*\)\s*revert\b")


def _source() -> str:
    return re.sub(r"//[^\n]*", "", ORACLE.read_text())


def _status(name: str) -> Status:
    return Status[name.upper()]


def _function_body(source: str, name: str) -> str:
    start = re.search(rf"\bfunction\s+{name}\s*\(", source)
    assert start, f"no function {name} in {ORACLE.name}"
    i = source.index("{", start.end())
    depth = 0
    for j in range(i, len(source)):
        depth += {"{": 1, "}": -1}.get(source[j], 0)
        if depth == 0:
            return source[i:j + 1]
    raise AssertionError(f"unbalanced braces in {name}")


def _accepted(source: str, name: str) -> set[Status]:
    """The statuses `name` does not revert on, by its `x.status ==/!= Status.Y) revert` checks and those
    of the private helpers it calls."""
    body = _function_body(source, name)
    accepted = set(Status)
    for op, value in GUARD.findall(body):
        accepted -= {_status(value)} if op == "==" else set(Status) - {_status(value)}
    for helper in sorted(set(re.findall(r"\b(_\w+)\s*\(", body))):
        if re.search(rf"\bfunction\s+{helper}\s*\(", source):
            accepted &= _accepted(source, helper)
    return accepted


def test_status_is_the_solidity_enum():
    enum = re.search(r"\benum\s+Status\s*\{([^}]*)\}", _source())
    assert enum, f"no enum Status in {ORACLE.name}"
    members = [m.strip() for m in enum.group(1).split(",") if m.strip()]
    assert [m.upper() for m in members] == [s.name for s in Status]  # the ABI encodes the position
    assert [s.value for s in Status] == list(range(len(members)))


def test_status_transitions_are_the_contracts_assignments():
    assigned = {_status(v) for v in re.findall(r"\.status\s*=\s*Status\.(\w+)\s*;", _source())}
    assert assigned == set().union(*STATUS_TRANSITIONS.values())
    assert set(STATUS_TRANSITIONS) == set(Status)
    assert Status(0) == Status.NONE  # what an unknown request id reads as: no transition leads back to it
    assert all(Status.NONE not in targets for targets in STATUS_TRANSITIONS.values())


@pytest.mark.parametrize("state", sorted(states.SENDS), ids=str)
def test_sends_in_is_what_the_contract_accepts(state):
    function = states.SENDS[state]
    assert _accepted(_source(), function) - {Status.NONE} == states.SENDS_IN[state], function


def test_node_states_table_is_closed():
    assert set(TRANSITIONS) == set(STATES) == set(states.SENDS_IN)
    assert set(states.SENDS) == set(STATES) - {FINAL} and not states.SENDS_IN[FINAL]
    assert all(targets <= set(STATES) and state not in targets for state, targets in TRANSITIONS.items())
    assert not TRANSITIONS[FINAL] and INITIAL == STATES[0] and FINAL == STATES[-1]
    reached, todo = {INITIAL}, [INITIAL]
    while todo:  # every state is reachable from the first, and each can end
        for t in TRANSITIONS[todo.pop()] - reached:
            reached.add(t)
            todo.append(t)
    assert reached == set(STATES)
    assert all(FINAL in targets for state, targets in TRANSITIONS.items() if state != FINAL)


def test_sql_check_is_the_table():
    assert states.sql_check() in protocol.SCHEMA
    db = sqlite3.connect(":memory:")
    db.executescript(protocol.SCHEMA)
    (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'requests'").fetchone()
    check = re.search(r"CHECK \(state IN \(([^)]*)\)\)", sql)
    assert check and re.findall(r"'([^']*)'", check.group(1)) == list(STATES)
    insert = "INSERT INTO requests (request_id, model_hash, input, state, updated) VALUES (?, x'00', x'00', ?, 0)"
    for i, state in enumerate(STATES):
        db.execute(insert, (i, state))
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(insert, (len(STATES), "finalized"))


def test_node_refuses_a_move_outside_the_table():
    class Recorder:
        def __init__(self):
            self.updates = []

        def _update(self, job, **fields):
            self.updates.append(fields)

    job = node.Job(1, bytes(32), b"", DONE, None, None, None, None, None, None, 0, None)
    recorder = Recorder()
    with pytest.raises(states.TransitionError):
        node.Operator._move(recorder, job, SEEN)
    assert not recorder.updates
    job.state = SEEN
    node.Operator._move(recorder, job, DONE, note="x")
    assert recorder.updates == [{"state": DONE, "note": "x"}]
