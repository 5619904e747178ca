"""The node operator: watches the oracle's requests, runs CVM, commits, then reveals.

    cvm node --rpc http://127.0.0.1:8545 --key 0x... --oracle 0x... --models DIR [--db FILE]
    python -m cvm.chain.node ...        (the same)

Pending work lives in SQLite, one row per request, moving through

    seen ──(run the model, store output and salt)──▶ commit tx ──▶ committed ──▶ reveal tx ──▶ revealed ──▶ done

A revealed request is done once it is finalised and every committed operator revealed; otherwise
the operator settles it after the reveal deadline (expiring it with a refund, slashing whoever
did not reveal) and then marks it done.

Requests are pipelined: a step moves each request as far as it can without waiting for a receipt
(cvm/chain/sender.py assigns nonces and stores each signed transaction before broadcasting it); a
request with a transaction in flight waits for its receipt, then moves on from the chain's state.
The salt is stored before the commit is signed, and every submission first reads the chain (is my
commitment there? my reveal?), so an operator killed at any point and restarted sends nothing twice
and loses nothing. A reverted transaction or an RPC error is logged and retried with exponential
backoff; the request's own deadlines end the retries.

A model that cannot be loaded or run (whatever it raises) refuses its request: the request is
marked done with a note and logged once, nothing is committed, and the other requests go on. Any
other unexpected exception while moving one request is logged with its traceback once and retried
with the same backoff; it never stops the loop or the other requests.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time

from eth_account.signers.local import LocalAccount
from web3 import Web3

import cvm
from cvm.chain.disputant import Claim, Disputant
from cvm.chain.contracts import TxFailed, call_struct, contract_at
from cvm.chain.jobs import JobDB
from cvm.chain.eligibility import Eligibility
from cvm.chain.protocol import MAX_COMMITTEE, RPC_ERRORS, Job, OnChain, bond_free, commitment
from cvm.chain.sender import Sender, Tx
from cvm.chain.serve import add_node_arguments, serve_operator
from cvm.chain.states import COMMITTED, DONE, INITIAL, REVEALED, SEEN, SENDS_IN, WATCHING, Status
from cvm.chain.store import ModelStore, StoreError
from cvm.chain.trace import Trace, output_leaf, run_trace, wire_bytes
from cvm.chain.watch import Watcher

log = logging.getLogger("cvm.node")

RETRY_DELAY = 1.0  # seconds before the first retry of a failed step; doubles on each failure
MAX_RETRY_DELAY = 60.0
LOG_CHUNK = 2_000  # blocks per eth_getLogs query
ZERO32 = bytes(32)
COMMIT_GAS = 300_000  # InferenceOracle.commit uses about 150,000 (the first on a request)
MAX_PASSES = 8  # passes over the requests in one step while receipts keep coming in (an instant chain)



class Operator(Watcher, JobDB):
    def __init__(self, w3: Web3, account: LocalAccount, oracle_address: str, store: ModelStore,
                 db_path: str | os.PathLike, backend: str = "numba", from_block: int = 0,
                 retry_delay: float = RETRY_DELAY, confirmations: int = 0, disputes: bool = True,
                 watch: bool = True):
        self.w3 = w3
        self.account = account
        self.oracle = contract_at(w3, "InferenceOracle", oracle_address)
        self.registry = contract_at(w3, "ModelRegistry", self.oracle.functions.registry().call())
        self.store = store
        self.backend = backend
        self.retry_delay = retry_delay
        self.disputes = disputes  # take part in the dispute game (off: trust the majority, for tests)
        self.watch = watch  # challenge windowed requests it holds no seat in (the optimistic path)
        self.committee_size = self.oracle.functions.committeeSize().call()  # immutable
        self.min_stake = self.oracle.functions.minStake().call()  # immutable
        self.slash_amount = self.oracle.functions.slashAmount().call()  # immutable: the bond per commit
        self.confirmations = confirmations  # a request is taken once this many blocks are on top of it
        self._reveal_gas: dict[int, int] = {}  # output length -> InferenceOracle.revealGas
        self._now = 0  # the latest block's timestamp, read once a pass
        self._retry_at: dict[int, float] = {}  # request id -> time.monotonic() of its next try
        self._traces: dict[int, Trace] = {}  # request id -> its run, for disputes
        self._traced: dict[int, str] = {}  # request id (-1: the scan) -> the unexpected failure last logged with its traceback
        self.name = f"node {account.address[:10]}"
        self.eligibility = Eligibility(w3, self.registry, account.address, self.min_stake, self.committee_size)
        JobDB.__init__(self, db_path, self.oracle.address, account.address)
        self.sender = Sender(w3, account, self.db, self.oracle.abi)
        self.disputant = Disputant(w3, account, self.oracle,  # its blocking sends use the same nonces
                                   send=lambda w3, a, call, gas=None: self.sender.send_and_wait(-1, call.fn_name, call, gas))
        if self._meta("next_block") is None:
            self._set_meta("next_block", str(from_block))

    # ------------------------------------------------------------ the loop

    def run(self, poll_interval: float = 1.0, stop: threading.Event | None = None) -> None:
        log.info("%s: watching oracle %s", self.name, self.oracle.address)
        stop = stop or threading.Event()
        last_failure = None
        while not stop.is_set():
            try:
                self.step()
                last_failure = None
            except Exception as e:  # step contains its own failures; this is the last line of defence
                failure = f"{type(e).__name__}: {e}"
                log.error("%s: step failed, going on: %s", self.name, failure, exc_info=failure != last_failure)
                last_failure = failure
            stop.wait(poll_interval)

    def step(self) -> None:
        """Reads new requests and the receipts that came in, then moves every open job as far as it
        can go without waiting for a receipt; again while receipts keep coming in (at most MAX_PASSES)."""
        try:
            self.scan()
        except RPC_ERRORS as e:
            log.warning("%s: reading request events failed, will retry: %s", self.name, e)
            return
        except Exception as e:  # a bug or a malformed event: the requests already known still move
            failure = f"{type(e).__name__}: {e}"
            log.error("%s: reading request events failed, will retry: %s", self.name, failure,
                      exc_info=self._traced.get(-1) != failure)
            self._traced[-1] = failure  # -1: the scan
        else:
            self._traced.pop(-1, None)
        self._collect()
        for _ in range(MAX_PASSES):
            self._pass()
            if not self._collect():
                break

    def _collect(self) -> int:
        """Receipts of the transactions in flight: a mined one is logged (the request moves on its next
        pass, from the chain's state), a reverted or dropped one is retried with backoff."""
        try:
            resolved = self.sender.poll()
        except RPC_ERRORS as e:
            log.warning("%s: reading receipts failed, will retry: %s", self.name, e)
            return 0
        for tx in resolved:
            self._received(tx)
        return len(resolved)

    def _received(self, tx: Tx) -> None:
        job = self.job(tx.request_id)
        if tx.state == "mined":
            log.info("%s: request %d: %s mined in block %d (gas %d)", self.name, tx.request_id, tx.kind, tx.block,
                     tx.gas_used)
            if job is not None and tx.kind in ("commit", "reveal"):
                self._update(job, **{f"{tx.kind}_tx": tx.tx_hash.hex()})
        elif job is not None and job.state != DONE:
            self._retry_later(job, tx.error)

    def _pass(self) -> None:
        try:
            self.sender.refresh()
            self._now = self.w3.eth.get_block("latest")["timestamp"]
        except RPC_ERRORS as e:
            log.warning("%s: reading the chain head failed, will retry: %s", self.name, e)
            return
        busy = {tx.request_id for tx in self.sender.in_flight()}
        for job in self.jobs():
            if job.request_id in busy or self._retry_at.get(job.request_id, 0.0) > time.monotonic():
                continue
            try:
                state = None
                while job.state not in (state, DONE):  # as far as it goes in this step
                    state = job.state
                    self.advance(job)
                self._traced.pop(job.request_id, None)
            except (TxFailed, *RPC_ERRORS) as e:
                self._retry_later(job, e)
            except Exception as e:  # a bug, not the chain: log its traceback once, retry like the rest
                failure = f"{job.state}: {type(e).__name__}: {e}"
                if self._traced.get(job.request_id) != failure:
                    self._traced[job.request_id] = failure
                    log.exception("%s: request %d: unexpected failure in the %s step", self.name,
                                  job.request_id, job.state)
                self._retry_later(job, e)

    def _retry_later(self, job: Job, e: Exception) -> None:
        attempts = job.attempts + 1
        delay = min(self.retry_delay * 2 ** min(attempts - 1, 16), MAX_RETRY_DELAY)
        self._retry_at[job.request_id] = time.monotonic() + delay
        self._update(job, attempts=attempts)
        detail = e if isinstance(e, (TxFailed, *RPC_ERRORS)) else f"{type(e).__name__}: {e}"
        log.warning("%s: request %d: %s step failed (failure %d), retrying in %.1f s: %s",
                    self.name, job.request_id, job.state, attempts, delay, detail)

    def scan(self) -> int:
        """Records InferenceRequested events from the next unread block to the latest one that has
        `confirmations` blocks on top (a request in a block that a reorg may drop is not taken yet)."""
        start, latest = int(self._meta("next_block")), self.w3.eth.block_number - self.confirmations
        found = 0
        while start <= latest:
            end = min(start + LOG_CHUNK - 1, latest)
            events = self.oracle.events.InferenceRequested().get_logs(from_block=start, to_block=end)
            with self.db:  # the rows and the cursor move together
                for ev in events:
                    a = ev["args"]
                    cur = self.db.execute(
                        "INSERT OR IGNORE INTO requests (request_id, model_hash, input, state, updated) "
                        "VALUES (?, ?, ?, ?, ?)", (a["requestId"], a["modelHash"], a["input"], INITIAL, time.time()))
                    found += cur.rowcount
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('next_block', ?)", (str(end + 1),))
            start = end + 1
        if found:
            log.info("%s: %d new request(s)", self.name, found)
        return found

    # ------------------------------------------------------------ one request

    def advance(self, job: Job) -> None:
        """One step of a request, from what the chain says now: commit, reveal or settle (by state)."""
        chain = self._read_chain(job)
        if chain.status == Status.NONE:
            self._done(job, "the oracle does not know this request", logging.ERROR)
            return
        step = {SEEN: self._commit_step, COMMITTED: self._reveal_step, REVEALED: self._settle_step,
                WATCHING: self._watch_step}.get(job.state)
        if step is not None:
            step(job, chain)

    def _read_chain(self, job: Job) -> OnChain:
        req = call_struct(self.oracle.functions.getRequest(job.request_id))
        sub = call_struct(self.oracle.functions.getSubmission(job.request_id, self.account.address))
        return OnChain(req, Status(req["status"]), req["commits"], self.committee_size,
                       bytes(sub["commitment"]), bytes(sub["vote"]), self._now)

    def _commit_step(self, job: Job, chain: OnChain) -> None:
        if chain.commitment != ZERO32:  # sent before a crash, or by another instance
            if job.salt is not None and chain.commitment == self.commitment(job):
                self._move(job, COMMITTED, note=None)
                log.info("%s: request %d: commitment on chain", self.name, job.request_id)
            else:
                self._done(job, "a commitment this database does not know is on chain", logging.ERROR)
            return
        if chain.status not in SENDS_IN[SEEN] or chain.now >= chain.req["commitDeadline"] or chain.commits >= MAX_COMMITTEE:
            self._done(job, f"commit phase closed ({chain.status.name.lower()}, {chain.commits} commits)")
            return
        operator = self.oracle.functions.operators(self.account.address).call()  # stake, unlock, stakedAt, locked
        if not (operator[0] >= self.min_stake and operator[1] == 0):
            self._done(job, "this account is not an active operator (stake too low or leaving)", logging.WARNING)
            return
        drawn = self.eligibility.drawn(job.request_id, chain.req, operator)
        if drawn is None:
            return  # the request's block is not sealed yet: its seed is unknown
        if not drawn:
            self._not_drawn(job, chain)
            return
        if not bond_free(operator, self._bonds_pending(job, chain), self._bond(job)):
            return  # every bond of this stake is locked in open requests: wait for one to close
        if job.salt is None and not self._compute(job):
            return
        self._send_commit(job, chain)

    def _bond(self, job: Job) -> int:
        """The bond a commit to this request locks (BatchedOracle prices it per model: batch_node.py)."""
        return self.slash_amount

    def _bonds_pending(self, job: Job, chain: OnChain) -> int:
        """Commits of this operator that may still lock a bond but are not on chain yet: the commit
        transactions in flight (batch_node.py adds its signed commits)."""
        return sum(tx.kind == "commit" for tx in self.sender.in_flight())

    def _send_commit(self, job: Job, chain: OnChain) -> None:
        """The commit transaction (cvm/chain/batch_node.py signs it for an aggregator instead)."""
        # an explicit limit, not an estimate: some nodes (anvil) estimate in the latest block, which may be
        # the request's own, whose hash (the draw's seed) is not known inside it
        self._submit(job, "commit", self.oracle.functions.commit(job.request_id, self.commitment(job)), COMMIT_GAS)

    def _reveal_step(self, job: Job, chain: OnChain) -> None:
        if chain.vote != ZERO32:  # first: a revealed submission's commitment reads zero (its slot holds the vote)
            self._move(job, REVEALED)
            log.info("%s: request %d: revealed", self.name, job.request_id)
            return
        if chain.commitment == ZERO32:  # the commit was dropped (a reorg): send it again, same salt
            self._move(job, SEEN, commit_tx=None)
            log.warning("%s: request %d: commitment no longer on chain, committing again", self.name, job.request_id)
            return
        if chain.status not in SENDS_IN[COMMITTED] or chain.now > chain.req["revealDeadline"]:  # Expired
            self._done(job, "reveal deadline passed before the reveal", logging.ERROR)
            return
        if chain.now <= chain.req["commitDeadline"]:  # InferenceOracle.revealOpen: seats are drawn until then
            return  # waiting for the commit deadline
        self._send_reveal(job, chain)

    def _send_reveal(self, job: Job, chain: OnChain) -> None:
        """The reveal transaction (cvm/chain/batch_node.py posts the opening for an aggregator instead)."""
        call = self.oracle.functions.reveal(job.request_id, job.output_hash, job.trace_root, job.salt, job.output)
        self._submit(job, "reveal", call, self.reveal_gas(job))

    def _settle_step(self, job: Job, chain: OnChain) -> None:
        req = chain.req
        if chain.vote == ZERO32 and chain.status == Status.PENDING:  # the reveal was dropped: again
            self._move(job, COMMITTED, reveal_tx=None)
            log.warning("%s: request %d: reveal no longer on chain, revealing again", self.name, job.request_id)
            return
        if self.disputes and (req["openDisputes"] or  # every revealer agrees with me: nothing to dispute
                              self.oracle.functions.votes(job.request_id, chain.vote).call() != req["reveals"]):
            mine = Claim(job.output_hash, Web3.keccak(job.output), job.trace_root)
            self.disputant.play(job.request_id, self.trace(job), mine, from_block=req["requestBlock"])
            req = call_struct(self.oracle.functions.getRequest(job.request_id))
        ours = chain.vote == bytes(req["result"])
        everyone_revealed = req["reveals"] >= req["commits"]
        if req["settled"] or (chain.status == Status.FINALIZED and ours and everyone_revealed
                              and not req["openDisputes"]):
            self._finish(job, req)
        elif chain.now > req["revealDeadline"] + req["challengeWindow"]:  # close it: finalise or settle
            if chain.status == Status.PENDING and req["challengeWindow"] and \
                    bytes(self.oracle.functions.survivorOf(job.request_id).call()) == chain.vote:
                call = self.oracle.functions.finalize(job.request_id, job.output_hash, job.trace_root, job.output)
                self._submit(job, "finalize", call, self.reveal_gas(job))
            else:
                try:  # estimated: a request another node settled first is not sent at all
                    self._submit(job, "settle", self.oracle.functions.settle(job.request_id))
                except TxFailed as e:
                    if e.error != "AlreadySettled":
                        raise
                    self._finish(job, call_struct(self.oracle.functions.getRequest(job.request_id)))

    def _submit(self, job: Job, kind: str, call, gas: int | None = None) -> None:
        """Sends without waiting: the request waits for the receipt, then moves from the chain's state."""
        tx = self.sender.submit(job.request_id, kind, call, gas)
        log.info("%s: request %d: %s sent (nonce %d)", self.name, job.request_id, kind, tx.nonce)

    def _finish(self, job: Job, req: dict) -> None:
        if Status(req["status"]) != Status.FINALIZED:
            self._done(job, "expired without a result", logging.WARNING)
        elif bytes(req["outputHash"]) == job.output_hash:
            self._done(job, "finalised with our output")
        else:
            self._done(job, f"finalised with another output hash {bytes(req['outputHash']).hex()[:16]}",
                       logging.ERROR)

    def _compute(self, job: Job) -> bool:
        """Runs the model and stores output, output hash and a fresh salt: before any commit.
        A model that cannot be loaded or run, whatever it raises, refuses the request."""
        try:
            model = self.store.get(self.eligibility.model_file(job.model_hash))
        except Exception as e:  # StoreError, or anything a bug in loading raises
            self._refuse(job, e)
            return False
        if (reason := self.eligibility.refusal(model, job.model_hash)) is not None:  # RPC errors: retried
            self._done(job, reason, logging.ERROR)
            return False
        try:  # the output from the node's backend, the trace from the reference interpreter: they must agree
            y = model.run(model.decode_input(job.input), backend=self.backend)
            output, output_hash = model.encode_output(y), cvm.output_hash(y)
            t = self.trace(job, model)
            if wire_bytes(t.tensors[output_leaf(model)]) != output:
                raise cvm.CVMError(f"the {self.backend} backend's output differs from the reference trace's")
        except Exception as e:  # a CVMError, or MemoryError, OverflowError, ...: the same refusal
            self._refuse(job, e)
            return False
        self._update(job, output=output, output_hash=output_hash, trace_root=t.root, salt=os.urandom(32))
        log.info("%s: request %d: output hash %s", self.name, job.request_id, job.output_hash.hex()[:16])
        return True

    def _refuse(self, job: Job, e: Exception) -> None:
        what = str(e) if isinstance(e, (StoreError, cvm.CVMError)) else f"{type(e).__name__}: {e}"
        self._done(job, f"refused: cannot run model {job.model_hash.hex()[:12]}: {what}", logging.ERROR)

    def _done(self, job: Job, note: str, level: int = logging.INFO) -> None:
        self._move(job, DONE, note=note)
        self._traces.pop(job.request_id, None)
        log.log(level, "%s: request %d: done: %s", self.name, job.request_id, note)

    def commitment(self, job: Job) -> bytes:
        return commitment(job.request_id, job.output_hash, job.trace_root, job.salt, self.account.address, job.output)

    def trace(self, job: Job, model: cvm.Model | None = None) -> Trace:
        """The request's whole run (reference interpreter), kept in memory for its disputes."""
        if job.request_id not in self._traces:
            model = model or self.store.get(self.eligibility.model_file(job.model_hash))
            self._traces[job.request_id] = run_trace(model, model.decode_input(job.input))
        return self._traces[job.request_id]

    def reveal_gas(self, job: Job) -> int:
        """The oracle's own rule for a reveal that may finalise (InferenceOracle.revealGas)."""
        if len(job.output) not in self._reveal_gas:  # a pure function of immutables and the length
            self._reveal_gas[len(job.output)] = self.oracle.functions.revealGas(len(job.output)).call()
        return self._reveal_gas[len(job.output)]


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="cvm node", description=__doc__.splitlines()[0])
    add_node_arguments(p)
    return serve_operator(p.parse_args(argv), Operator)


if __name__ == "__main__":
    sys.exit(main())
