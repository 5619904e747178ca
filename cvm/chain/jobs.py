"""The node's SQLite database: one row per request (protocol.Job) moving through states.STATES, and a
small key-value table binding the database to one operator of one oracle. The transactions in flight
live in the same file (sender.TX_SCHEMA), so a request's row and its transactions survive together."""

from __future__ import annotations

import os
import sqlite3
import time

from cvm.chain.protocol import SCHEMA, Job
from cvm.chain.states import DONE, SEEN, check_transition


# Commits signed for an aggregator (cvm/chain/batch_node.py): anyone may submit one until its commit
# deadline, so each may lock a bond then; recorded before the signature leaves the node.
SIGNED_SCHEMA = """
CREATE TABLE IF NOT EXISTS signed_commits (
    request_id      INTEGER PRIMARY KEY,
    commit_deadline INTEGER NOT NULL
)"""


class JobDB:
    def __init__(self, db_path: str | os.PathLike, oracle: str, operator: str):
        self.db = sqlite3.connect(db_path)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(requests)")}
        if "trace_root" not in columns:  # a database of a node from before trace commitments
            self.db.execute("ALTER TABLE requests ADD COLUMN trace_root BLOB")
        self.db.execute(SIGNED_SCHEMA)
        self._bind_meta("oracle", oracle)
        self._bind_meta("operator", operator)

    def _meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def _set_meta(self, key: str, value: str) -> None:
        with self.db:
            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def _bind_meta(self, key: str, value: str) -> None:
        """A database belongs to one operator of one oracle."""
        stored = self._meta(key)
        if stored is None:
            self._set_meta(key, value)
        elif stored != value:
            raise ValueError(f"this database belongs to {key} {stored}, not {value}")

    def _move(self, job: Job, state: str, **fields) -> None:
        """Moves a request to another state (one of the moves states.TRANSITIONS allows)."""
        check_transition(job.state, state)
        self._update(job, state=state, **fields)

    def _update(self, job: Job, **fields) -> None:
        fields["updated"] = time.time()
        sets = ", ".join(f"{k} = ?" for k in fields)
        with self.db:
            self.db.execute(f"UPDATE requests SET {sets} WHERE request_id = ?", (*fields.values(), job.request_id))
        for k, v in fields.items():
            if hasattr(job, k):
                setattr(job, k, v)

    def record_signed(self, request_id: int, commit_deadline: int) -> None:
        """A commit of this request was signed (before it is posted anywhere); the records of requests
        that are done go."""
        with self.db:
            self.db.execute("DELETE FROM signed_commits WHERE request_id IN "
                            "(SELECT request_id FROM requests WHERE state = ?)", (DONE,))
            self.db.execute("INSERT OR REPLACE INTO signed_commits VALUES (?, ?)", (request_id, commit_deadline))

    def signed_pending(self, now: int, exclude: int | None = None) -> int:
        """Signed commits that may still land on chain and lock a bond: their request is still waiting
        for its commit here (state seen) and their commit deadline has not passed. A commit that
        landed but was not read yet counts too: the count errs on the safe side."""
        row = self.db.execute(
            "SELECT COUNT(*) FROM signed_commits s JOIN requests r ON r.request_id = s.request_id "
            "WHERE r.state = ? AND s.commit_deadline >= ? AND s.request_id != ?",
            (SEEN, now, -1 if exclude is None else exclude)).fetchone()
        return row[0]

    def jobs(self, include_done: bool = False, request_id: int | None = None) -> list[Job]:
        where, args = (["1"], []) if include_done else (["state != ?"], [DONE])
        if request_id is not None:
            where, args = where + ["request_id = ?"], args + [request_id]
        rows = self.db.execute(
            "SELECT request_id, model_hash, input, state, output, output_hash, salt, trace_root, commit_tx, reveal_tx, "
            f"attempts, note FROM requests WHERE {' AND '.join(where)} ORDER BY request_id", args,
        ).fetchall()
        return [Job(*row) for row in rows]

    def job(self, request_id: int) -> Job | None:
        return next((j for j in self.jobs(include_done=True, request_id=request_id)), None)

