"""The node operator for BatchedOracle: cvm/chain/node.py's loop, SQLite rows and restart safety, with
the commit signed and the opening signed and posted to a relay (cvm/chain/relay.py) instead of sent,
and the committee's aggregator submitting them together.

    python -m cvm.chain.batch_node --rpc URL --key KEY --oracle ADDR --models DIR --relay http://127.0.0.1:8600

Who aggregates: the commits, the node with the lowest address among the signed commits on the relay
(a signer: only signers and seated members may submit them); the openings, the committer with the
lowest address among the openings on the relay. Each submits when it holds the draw's expected n
commits (every drawn operator that signs before the deadline gets a seat) or every committer's
opening, or a majority of equal openings, or MARGIN seconds before the deadline with what it holds;
openings only after the commit deadline. A node whose commit or opening is not on chain FALLBACK
seconds before the deadline sends it itself (BatchedOracle.commit / reveal with one opening): a relay
or an aggregator that drops it costs that node one transaction, not its seat. Without --relay every
member commits and reveals alone.

Disputes: once revealed, a node that sees another revealed vote than its own, not refuted yet,
opens a dispute against it and plays it to the end with cvm/chain/disputant.py's player (the same
as node.py's; BatchedDisputant only passes the round to BatchedOracle.openDispute or, for a request it
holds no seat in but watches (cvm/chain/watch.py), to BatchedOracle.challenge), until the reveal
deadline plus the request's challenge window. It closes the request only when no dispute is open.

Bonds: a signed commit locks the request's bond (its round's `bond`) once anyone submits it, which may
be any time before the commit deadline; the node records each one before posting it
(JobDB.record_signed) and counts the ones not on chain yet as locked, so it never signs more commits
than its free stake covers.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import urllib.request

from web3 import Web3

from cvm.chain.batch import (
    Round, StaleRound, latest_round, opening_tuple, sign_commit, sign_opening, signed_commit_tuple,
)
from cvm.chain.contracts import contract_at
from cvm.chain.disputant import Claim, Disputant
from cvm.chain.node import Operator
from cvm.chain.protocol import MAX_COMMITTEE, Job, OnChain
from cvm.chain.sender import Sender
from cvm.chain.serve import add_node_arguments, serve_operator
from cvm.chain.states import COMMITTED, Status

log = logging.getLogger("cvm.node")

MARGIN = 0.5  # of a window: the aggregator submits what it holds once this much of it is left
FALLBACK = 0.25  # of a window: a member whose message is not on chain sends it itself
BATCH_COMMIT_GAS = 120_000  # commitSigned: base, plus this per signed commit
OPENING_GAS = 40_000  # reveal: revealGas, plus this per opening


class BatchedDisputant(Disputant):
    """disputant.Disputant for BatchedOracle: openDispute takes the request's current round, and the
    dispute window ends `revealWindow + challengeWindow` after the round's commit deadline."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.reveal_window = self.oracle.functions.revealWindow().call()  # immutable
        self._blocks: dict[int, int] = {}

    def open_call(self, request_id: int, defender: str, mine: Claim, theirs: Claim, outside: bool = False):
        r = self.round_of(request_id)
        fn = self.oracle.functions.challenge if outside else self.oracle.functions.openDispute
        return fn(request_id, r.call, defender, mine.as_tuple(), theirs.as_tuple())

    def window_end(self, request_id: int) -> int:
        r = self.round_of(request_id)
        return r.reveal_deadline(self.reveal_window) + r.fields["challengeWindow"]

    def round_of(self, request_id: int) -> Round:
        """The request's current round (batch.latest_round)."""
        try:
            return latest_round(self.oracle, request_id, from_block=self._from_block(request_id))
        except StaleRound as e:  # not indexed yet: the node retries the step, like any RPC failure
            raise ConnectionError(str(e)) from e

    def _from_block(self, request_id: int) -> int:
        """The request's block, where its logs begin (read once)."""
        if request_id not in self._blocks:
            logs = self.oracle.events.InferenceRequested().get_logs(from_block=0,
                                                                    argument_filters={"requestId": request_id})
            self._blocks[request_id] = logs[0]["blockNumber"] if logs else 0
        return self._blocks[request_id]


class BatchedOperator(Operator):
    def __init__(self, *args, relay: str | None = None, **kw):
        super().__init__(*args, **kw)
        self.oracle = contract_at(self.w3, "BatchedOracle", self.oracle.address)
        self.sender = Sender(self.w3, self.account, self.db, self.oracle.abi)
        self.disputant = BatchedDisputant(  # its blocking sends use the same nonces
            self.w3, self.account, self.oracle,
            send=lambda w3, a, call, gas=None: self.sender.send_and_wait(-1, call.fn_name, call, gas))
        self.relay = relay.rstrip("/") if relay else None
        self.chain_id = self.w3.eth.chain_id
        self.commit_window = self.oracle.functions.commitWindow().call()
        self.reveal_window = self.oracle.functions.revealWindow().call()
        self.quorum = self.oracle.functions.quorum().call()
        self._rounds: dict[int, Round] = {}
        self._request_block: dict[int, int] = {}

    # ------------------------------------------------------------ the chain

    def _read_chain(self, job: Job) -> OnChain:
        rid = job.request_id
        if rid not in self._request_block:
            logs = self.oracle.events.InferenceRequested().get_logs(from_block=0, argument_filters={"requestId": rid})
            self._request_block[rid] = logs[0]["blockNumber"] if logs else 0
        try:
            r = latest_round(self.oracle, rid, from_block=self._request_block[rid])
        except StaleRound as e:  # not indexed yet: this step waits
            raise ConnectionError(str(e)) from e
        self._rounds[rid] = r
        f = r.fields
        req = {"commitDeadline": f["commitDeadline"], "revealDeadline": r.reveal_deadline(self.reveal_window),
               "requestBlock": f["requestBlock"], "totalStake": f["totalStake"],
               "challengeWindow": f["challengeWindow"], "commits": len(r.committers)}
        me = self.account.address
        return OnChain(req, r.status, len(r.committers), self.committee_size, r.commitment_of(me) or bytes(32),
                       r.vote_of(me) or bytes(32), self._now)

    # ------------------------------------------------------------ the relay

    def _relay(self, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.relay + path, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            return json.loads(resp.read())

    def _board(self, rid: int) -> dict:
        return self._relay(f"/round?oracle={self.oracle.address}&requestId={rid}")

    # ------------------------------------------------------------ commits

    def _bond(self, job: Job) -> int:
        return self._rounds[job.request_id].fields["bond"]

    def _bonds_pending(self, job: Job, chain: OnChain) -> int:
        """Commit transactions in flight, and the commits signed for other requests that an aggregator
        may still submit (this request's own signature, if any, is the bond asked for now)."""
        return super()._bonds_pending(job, chain) + self.signed_pending(chain.now, exclude=job.request_id)

    def _send_commit(self, job: Job, chain: OnChain) -> None:
        r = self._rounds[job.request_id]
        left = chain.req["commitDeadline"] - chain.now
        if self.relay is None or left <= FALLBACK * self.commit_window:
            self._submit(job, "commit", self.oracle.functions.commit(job.request_id, r.call, self.commitment(job)),
                         BATCH_COMMIT_GAS * 2)
            return
        self.record_signed(job.request_id, chain.req["commitDeadline"])  # its bond counts from now on
        signed = sign_commit(self.account, self.chain_id, self.oracle.address, job.request_id, self.commitment(job))
        self._relay("/commit", {**signed, "oracle": self.oracle.address, "chainId": self.chain_id,
                                "requestId": job.request_id})
        commits = [c for c in self._board(job.request_id)["commits"] if c["operator"] not in r.committers]
        if not commits or min(c["operator"].lower() for c in commits) != self.account.address.lower():
            return  # another node aggregates; the fallback above covers it failing
        if len(commits) < self.committee_size - len(r.committers) and left > MARGIN * self.commit_window:
            return  # wait for the draw's expected seats (every drawn operator gets one) or the margin
        commits = sorted(commits, key=lambda c: c["operator"].lower())[:MAX_COMMITTEE - len(r.committers)]
        call = self.oracle.functions.commitSigned(job.request_id, r.call, [signed_commit_tuple(c) for c in commits])
        self._submit(job, "commit-batch", call, BATCH_COMMIT_GAS * (1 + len(commits)))
        log.info("%s: request %d: %d signed commits sent together", self.name, job.request_id, len(commits))

    # ------------------------------------------------------------ reveals

    def _send_reveal(self, job: Job, chain: OnChain) -> None:
        r = self._rounds[job.request_id]
        me = self.account.address
        left = chain.req["revealDeadline"] - chain.now
        mine = opening_tuple(me, job.output_hash, job.trace_root, job.salt)
        if self.relay is None or left <= FALLBACK * self.reveal_window:
            self._submit(job, "reveal", self.oracle.functions.reveal(job.request_id, r.call, [mine], job.output),
                         self.reveal_gas(job) + OPENING_GAS)
            return
        self._relay("/open", sign_opening(self.account, self.chain_id, self.oracle.address, job.request_id,
                                          job.output_hash, job.output, job.trace_root, job.salt))
        # openings of my output that are still unrevealed on chain (others' outputs go in their own batches)
        same = [o for o in self._board(job.request_id)["openings"]
                if o["output"] == "0x" + job.output.hex() and r.commitment_of(o["operator"]) is not None]
        if not same or min(o["operator"].lower() for o in same) != me.lower():
            return  # another committer aggregates
        same = sorted(same, key=lambda o: o["operator"].lower())
        agreeing = [o for o in same
                    if o["outputHash"] == "0x" + job.output_hash.hex() and o["traceRoot"] == "0x" + job.trace_root.hex()]
        needed = max(self.quorum, len(r.committers) // 2 + 1) - r.votes(self._vote(job))  # OracleCore._threshold
        if r.status == Status.PENDING and not r.fields["challengeWindow"] and 0 < needed <= len(agreeing):
            batch = agreeing[:needed]  # the finalising batch: just the quorum (later ones: bond back, no fee)
        elif r.status == Status.FINALIZED or left <= MARGIN * self.reveal_window or \
                len(same) >= sum(r.commitment_of(a) is not None for a in r.committers):
            batch = same
        else:
            return  # wait for a quorum of this output, every committer's opening, or the margin
        openings = [opening_tuple(Web3.to_checksum_address(o["operator"]), bytes.fromhex(o["outputHash"][2:]),
                                  bytes.fromhex(o["traceRoot"][2:]), bytes.fromhex(o["salt"][2:])) for o in batch]
        call = self.oracle.functions.reveal(job.request_id, r.call, openings, job.output)
        self._submit(job, "reveal-batch", call, self.reveal_gas(job) + OPENING_GAS * len(openings))
        log.info("%s: request %d: %d openings sent together", self.name, job.request_id, len(openings))

    def finalize_call(self, job: Job):
        r = self._rounds[job.request_id]
        return self.oracle.functions.finalize(job.request_id, r.call, job.output_hash, job.trace_root, job.output)

    def open_disputes(self, request_id: int) -> int:
        return self.oracle.functions.disputesOf(request_id).call()[0]

    def _vote(self, job: Job) -> bytes:
        codec = Web3().codec
        return Web3.keccak(codec.encode(["bytes32", "bytes32", "bytes32"],
                                        [job.output_hash, Web3.keccak(job.output), job.trace_root]))

    # ------------------------------------------------------------ closing

    def _settle_step(self, job: Job, chain: OnChain) -> None:
        rid = job.request_id
        r = self._rounds[rid]
        if chain.vote == bytes(32) and chain.status == Status.PENDING:  # the reveal was dropped: again
            self._move(job, COMMITTED, reveal_tx=None)
            return
        open_disputes = self.oracle.functions.disputesOf(rid).call()[0]
        if self.disputes and (open_disputes or self._contested(r, chain.vote)):
            mine = Claim(job.output_hash, Web3.keccak(job.output), job.trace_root)
            self.disputant.play(rid, self.trace(job), mine, from_block=self._request_block[rid])
            open_disputes = self.oracle.functions.disputesOf(rid).call()[0]
            r = self._rounds[rid] = self.disputant.round_of(rid)
        if open_disputes:
            return  # the game goes on: its moves come on the next steps
        everyone_revealed = all(r.revealed(i) for i in range(len(r.committers)))
        seat = r.seat(self.account.address)
        bonded = seat is not None and r.fields["bondedMask"] >> seat & 1  # a minority vote: settle releases it
        if r.fields["settled"] or (r.status == Status.FINALIZED and everyone_revealed and not bonded):
            self._close(job, r)
        elif chain.now > chain.req["revealDeadline"] + r.fields["challengeWindow"]:
            if r.status == Status.PENDING and r.fields["challengeWindow"] and self._survivor(r) == chain.vote:
                call = self.oracle.functions.finalize(job.request_id, r.call, job.output_hash, job.trace_root,
                                                      job.output)
                self._submit(job, "finalize", call, self.reveal_gas(job))
            else:
                self._submit(job, "settle", self.oracle.functions.settle(job.request_id, r.call))

    def _contested(self, r: Round, vote: bytes) -> bool:
        """Whether another revealed vote than mine stands unrefuted (the dispute window is the
        disputant's to check)."""
        others = {r.word(i) for i in range(len(r.committers)) if r.revealed(i)} - {vote}
        return any(not self.oracle.functions.refuted(r.request_id, v).call() for v in others)

    def _survivor(self, r: Round) -> bytes | None:
        votes = {r.word(i) for i in range(len(r.committers)) if r.revealed(i)}
        votes = {v for v in votes if not self.oracle.functions.refuted(r.request_id, v).call()}
        return votes.pop() if len(votes) == 1 else None

    def _close(self, job: Job, r: Round) -> None:
        if r.status != Status.FINALIZED:
            self._done(job, "expired without a result", logging.WARNING)
        elif r.result() == self._vote(job):
            self._done(job, "finalised with our output")
        else:
            self._done(job, "finalised with another output", logging.ERROR)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.chain.batch_node", description=__doc__.splitlines()[0])
    add_node_arguments(p)
    p.add_argument("--relay", help="the committee's relay (python -m cvm.chain.relay); none: every step alone")
    args = p.parse_args(argv)
    return serve_operator(args, BatchedOperator, relay=args.relay)  # stops on the first SIGTERM/SIGINT


if __name__ == "__main__":
    sys.exit(main())
