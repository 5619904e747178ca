"""One account's transactions, pipelined: several in flight, nonces assigned here, receipts collected
together, and nothing lost or sent twice across a crash.

    sender = Sender(w3, account, db, abi)
    sender.submit(request_id, "commit", call, gas=...)   # signs, stores, broadcasts; does not wait
    for tx in sender.poll(): ...                         # the transactions whose receipts came in

Why each rule:

* A signed transaction is written to SQLite (the `txs` table) before it is broadcast.
  A process killed after signing rebroadcasts the same bytes when it restarts; the chain mines a given
  nonce once, so there is never a second transaction for the same step, and never a lost one.
* The next nonce is the largest of the chain's pending count, the highest nonce in flight + 1 and
  the last nonce this process assigned + 1: a
  stored transaction that never reached the node keeps its nonce, and transactions this account sent
  by other means are not overwritten. A mined transaction at or above the chain's pending count was
  dropped by a reorg: it is marked so, and its nonce is used again (the node sends its step again
  when it sees the step missing on chain).
* `poll` reads the account's mined nonce first, then each receipt: a transaction without a receipt
  whose nonce the chain has passed was replaced by another one with that nonce (`dropped`); one still
  waiting is broadcast again after REBROADCAST_AFTER seconds (a node may have lost it).
* Receipts are awaited by polling, not by blocking on each one: a node with 150 requests has 150
  transactions in flight, and one slow receipt holds up none of the others.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.exceptions import TransactionNotFound

from cvm.chain.contracts import GAS_MARGIN, REVERT_ERRORS, TxFailed, _failure

log = logging.getLogger("cvm.sender")

REBROADCAST_AFTER = 20.0  # seconds without a receipt before the same signed bytes are sent again
IN_FLIGHT = ("signed", "sent")  # signed: stored, not known to have reached the node; sent: broadcast
TX_STATES = (*IN_FLIGHT, "mined", "reverted", "dropped")

TX_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS txs (
    id         INTEGER PRIMARY KEY,
    nonce      INTEGER NOT NULL,
    request_id INTEGER NOT NULL,
    kind       TEXT NOT NULL,
    tx_hash    BLOB NOT NULL UNIQUE,
    raw        BLOB NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ({", ".join(f"'{s}'" for s in TX_STATES)})),
    broadcast  REAL,
    block      INTEGER,
    gas_used   INTEGER,
    error      TEXT
);
CREATE INDEX IF NOT EXISTS txs_request ON txs (request_id, state);
"""


@dataclass
class Tx:
    nonce: int
    request_id: int
    kind: str  # the oracle function it calls: commit, reveal, settle, finalize, ...
    tx_hash: bytes
    state: str
    block: int | None = None
    gas_used: int | None = None
    error: TxFailed | None = None  # why it reverted (read when the receipt came in)


class Sender:
    def __init__(self, w3: Web3, account: LocalAccount, db: sqlite3.Connection, abi: list[dict]):
        self.w3, self.account, self.db, self.abi = w3, account, db, abi
        self.address = account.address
        self.chain_id = w3.eth.chain_id
        self.db.executescript(TX_SCHEMA)
        self._last: int | None = None  # the last nonce this process assigned
        self.refresh()

    def refresh(self) -> None:
        """Reads the chain's pending nonce and the fees once, for every transaction signed until the
        next refresh (the node refreshes once a pass: a pass of 150 requests is not 300 more calls)."""
        self._chain_nonce = self.w3.eth.get_transaction_count(self.address, "pending")
        with self.db:  # mined at a nonce the chain has not reached: a reorg dropped it
            dropped = self.db.execute("UPDATE txs SET state = 'dropped', error = 'dropped by a reorg' "
                                      "WHERE nonce >= ? AND state IN ('mined', 'reverted')", (self._chain_nonce,))
        if dropped.rowcount:
            self._last = None
        tip = self.w3.eth.max_priority_fee
        base = self.w3.eth.get_block("latest").get("baseFeePerGas", 0)
        self._fees = {"maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip}

    # ------------------------------------------------------------ sending

    def submit(self, request_id: int, kind: str, call, gas: int | None = None) -> Tx:
        """Signs `call` with the next nonce, stores it, broadcasts it and returns at once. With no
        `gas`, the call is estimated first: a call that would revert raises TxFailed and uses no nonce."""
        params = {"from": self.address, "value": 0, "chainId": self.chain_id}
        try:
            if gas is None:
                gas = int(call.estimate_gas(params) * GAS_MARGIN)
            nonce = self._next_nonce()
            tx = call.build_transaction({**params, **self._fees, "gas": gas, "nonce": nonce})
            signed = self.account.sign_transaction(tx)
        except REVERT_ERRORS as e:
            raise _failure(self.w3, self.abi, f"{kind} would revert", e) from e
        tx = Tx(nonce, request_id, kind, bytes(signed.hash), "signed")
        with self.db:
            # the same bytes again (a step resent after a reorg dropped it): the old row lives again
            self.db.execute("INSERT INTO txs (nonce, request_id, kind, tx_hash, raw, state) VALUES (?, ?, ?, ?, ?, ?) "
                            "ON CONFLICT (tx_hash) DO UPDATE SET state = 'signed', broadcast = NULL, block = NULL, "
                            "gas_used = NULL, error = NULL",
                            (nonce, request_id, kind, tx.tx_hash, bytes(signed.raw_transaction), "signed"))
        self._broadcast(tx, bytes(signed.raw_transaction))
        return tx

    def send_and_wait(self, request_id: int, kind: str, call, gas: int | None = None, timeout: float = 120) -> dict:
        """`submit`, then wait for this one receipt (for the rare blocking caller: the dispute game).
        Raises TxFailed when it reverted; returns the receipt."""
        tx = self.submit(request_id, kind, call, gas)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            resolved = {t.tx_hash: t for t in self.poll(only=tx.tx_hash)}
            if tx.tx_hash in resolved:
                done = resolved[tx.tx_hash]
                if done.state != "mined":
                    raise done.error or TxFailed(f"{kind} transaction {done.state}")
                return self.w3.eth.get_transaction_receipt(done.tx_hash)
            time.sleep(0.05)
        raise TimeoutError(f"no receipt for {kind} transaction 0x{tx.tx_hash.hex()} after {timeout} s")

    def _next_nonce(self) -> int:
        flying = self.db.execute("SELECT MAX(nonce) FROM txs WHERE state IN (?, ?)", IN_FLIGHT).fetchone()[0]
        nonce = self._chain_nonce
        if flying is not None:
            nonce = max(nonce, flying + 1)
        if self._last is not None:
            nonce = max(nonce, self._last + 1)
        self._last = nonce
        return nonce

    def _broadcast(self, tx: Tx, raw: bytes) -> None:
        """Sends the stored bytes; any failure leaves the row for `poll` to resolve or send again."""
        try:
            self.w3.eth.send_raw_transaction(raw)
        except Exception as e:  # unreachable node, "already known", "nonce too low": poll decides
            log.warning("%s: broadcast of %s (nonce %d) failed, poll will retry: %s", self.address[:10], tx.kind,
                        tx.nonce, e)
            return
        with self.db:
            self.db.execute("UPDATE txs SET state = 'sent', broadcast = ? WHERE tx_hash = ?", (time.time(), tx.tx_hash))

    # ------------------------------------------------------------ receipts

    def in_flight(self, request_id: int | None = None) -> list[Tx]:
        where, args = "state IN (?, ?)", list(IN_FLIGHT)
        if request_id is not None:
            where, args = where + " AND request_id = ?", args + [request_id]
        rows = self.db.execute(f"SELECT nonce, request_id, kind, tx_hash, state FROM txs WHERE {where} "
                               "ORDER BY nonce", args).fetchall()
        return [Tx(n, r, k, bytes(h), s) for n, r, k, h, s in rows]

    def busy(self, request_id: int) -> bool:
        return self.db.execute("SELECT 1 FROM txs WHERE request_id = ? AND state IN (?, ?) LIMIT 1",
                               (request_id, *IN_FLIGHT)).fetchone() is not None

    def poll(self, only: bytes | None = None) -> list[Tx]:
        """Collects the receipts of the transactions in flight (or of the one hash `only`); returns those
        resolved now (mined, reverted or dropped) and sends again the ones that have waited too long."""
        pending = [t for t in self.in_flight() if only is None or t.tx_hash == only]
        if not pending:
            return []
        mined_nonce = self.w3.eth.get_transaction_count(self.address, "latest")  # before the receipts: see above
        resolved = []
        for tx in pending:
            try:
                receipt = self.w3.eth.get_transaction_receipt(tx.tx_hash)
            except TransactionNotFound:
                receipt = None
            if receipt is not None:
                resolved.append(self._resolve(tx, receipt))
            elif tx.nonce < mined_nonce:
                tx.state, tx.error = "dropped", TxFailed(f"{tx.kind} nonce {tx.nonce} was taken by another transaction")
                self._store(tx)
                resolved.append(tx)
            else:
                self._maybe_rebroadcast(tx)
        return resolved

    def _resolve(self, tx: Tx, receipt) -> Tx:
        tx.block, tx.gas_used = receipt["blockNumber"], receipt["gasUsed"]
        tx.state = "mined" if receipt["status"] == 1 else "reverted"
        if tx.state == "reverted":
            tx.error = self._why(tx, receipt)
        self._store(tx)
        return tx

    def _why(self, tx: Tx, receipt) -> TxFailed:
        """Replays a reverted transaction on the state before its block to name the custom error."""
        message = f"{tx.kind} transaction 0x{tx.tx_hash.hex()} reverted (gas used {receipt['gasUsed']})"
        try:
            sent = self.w3.eth.get_transaction(tx.tx_hash)
            self.w3.eth.call({"from": self.address, "to": sent["to"], "data": sent["input"], "gas": sent["gas"]},
                             receipt["blockNumber"] - 1)
        except REVERT_ERRORS as e:
            return _failure(self.w3, self.abi, message, e)
        except Exception as e:  # the replay itself failed: the message still says what happened
            return TxFailed(f"{message}; replay failed: {e}")
        return TxFailed(message)

    def _store(self, tx: Tx) -> None:
        with self.db:
            self.db.execute("UPDATE txs SET state = ?, block = ?, gas_used = ?, error = ? WHERE tx_hash = ?",
                            (tx.state, tx.block, tx.gas_used, str(tx.error) if tx.error else None, tx.tx_hash))

    def _maybe_rebroadcast(self, tx: Tx) -> None:
        last = self.db.execute("SELECT broadcast, raw FROM txs WHERE tx_hash = ?", (tx.tx_hash,)).fetchone()
        if last[0] is None or time.time() - last[0] > REBROADCAST_AFTER:
            self._broadcast(tx, bytes(last[1]))
