"""A request's states, in one table: the node's own and the oracle contract's, with their transitions.

Two sets of states, legitimately different:

* ``Status``: the request on chain, ``InferenceOracle.Status`` mirrored in declaration order (the
  ABI encodes it as that uint8). ``STATUS_TRANSITIONS`` is what the contract does to it: ``request``
  makes it Pending, a quorum of reveals Finalized, ``settle`` past the reveal deadline Expired.
* ``STATES``: this operator's progress on the request, local to the node's SQLite database (the
  ``requests.state`` column, whose CHECK constraint is ``sql_check()``). ``TRANSITIONS`` lists every
  move the node makes; ``Operator`` refuses any other.

``SENDS_IN`` maps them: for each node state, the on-chain statuses in which the contract accepts the
transaction that state sends (``SENDS``: commit, reveal, settle), by its status checks alone (it checks
deadlines, the settled flag and the submissions too); ``Operator`` reads it before a commit or a
reveal. A request whose status is None is unknown to the oracle, and the node marks it done whatever
its state. tests/chain/test_request_states.py
compares all of this with the SQL schema and with contracts/src/InferenceOracle.sol.
"""

from __future__ import annotations

from enum import IntEnum


class Status(IntEnum):
    """InferenceOracle.Status"""

    NONE = 0
    PENDING = 1
    FINALIZED = 2
    EXPIRED = 3


STATUS_TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.NONE: frozenset({Status.PENDING}),  # request()
    Status.PENDING: frozenset({Status.FINALIZED, Status.EXPIRED}),  # a quorum of reveals; settle()
    Status.FINALIZED: frozenset(),
    Status.EXPIRED: frozenset(),
}

SEEN, COMMITTED, REVEALED, DONE = "seen", "committed", "revealed", "done"
WATCHING = "watching"  # not drawn, the request has a challenge window: computing it and challenging what differs
STATES = (SEEN, COMMITTED, REVEALED, WATCHING, DONE)  # in the order of a request's life
INITIAL, FINAL = SEEN, DONE

TRANSITIONS: dict[str, frozenset[str]] = {
    SEEN: frozenset({COMMITTED, WATCHING, DONE}),  # committed (or found ours on chain); not drawn; refused or too late
    COMMITTED: frozenset({SEEN, REVEALED, DONE}),  # commitment dropped by a reorg: again; revealed; too late
    REVEALED: frozenset({COMMITTED, DONE}),  # reveal dropped by a reorg: again; finalised or settled
    WATCHING: frozenset({DONE}),  # the challenge window closed (finalised with its output or another)
    DONE: frozenset(),
}

SENDS = {SEEN: "commit", COMMITTED: "reveal", REVEALED: "settle", WATCHING: "challenge"}  # state -> what it calls
SENDS_IN: dict[str, frozenset[Status]] = {  # node state -> statuses in which its transaction is accepted
    SEEN: frozenset({Status.PENDING}),  # commit
    COMMITTED: frozenset({Status.PENDING, Status.FINALIZED}),  # reveal (a late reveal escapes the slash)
    REVEALED: frozenset({Status.PENDING, Status.FINALIZED, Status.EXPIRED}),  # settle (Expired: settled already)
    WATCHING: frozenset({Status.PENDING, Status.FINALIZED}),  # challenge (until the window's end)
    DONE: frozenset(),
}


class TransitionError(ValueError):
    """A move of a request that TRANSITIONS does not allow: a bug in the node."""


def check_transition(old: str, new: str) -> None:
    if new not in TRANSITIONS.get(old, ()):
        raise TransitionError(f"a request cannot move from state {old!r} to {new!r}")


def sql_check(column: str = "state") -> str:
    """The CHECK constraint of the state column: exactly STATES."""
    states = ", ".join(f"'{s}'" for s in STATES)
    return f"CHECK ({column} IN ({states}))"
