"""The optimistic path of a node (node.Operator's mixin): a request it holds no seat in, but that has a
challenge window, is computed anyway and watched until the window closes. Every revealed vote that
differs from its own is challenged (the oracle's `challenge`: the operator locks a bond and claims
its own output and trace) and the dispute played to the end with disputant.py; after the window it
finalises the request when its own vote is the one left standing. So one honest staked operator,
seated or not, stops a forged result on a request with a window (docs/chain.md, "What the oracle
promises")."""

from __future__ import annotations

import logging

from web3 import Web3
from web3.exceptions import ContractLogicError

from cvm.chain.contracts import call_struct
from cvm.chain.disputant import Claim
from cvm.chain.protocol import Job, OnChain
from cvm.chain.states import WATCHING, Status

log = logging.getLogger("cvm.node")


class Watcher:
    """What node.Operator does with a request it was not drawn for (state WATCHING)."""

    def _not_drawn(self, job: Job, chain: OnChain) -> None:
        """A request this operator holds no seat in: with a challenge window, it watches (one honest
        staked operator anywhere is enough to stop a forged result); without one, it is done."""
        if not (self.watch and self.disputes and chain.req["challengeWindow"]):
            self._done(job, "not drawn for this request")
            return
        self._move(job, WATCHING, note=None)
        log.info("%s: request %d: not drawn; watching it through its challenge window", self.name, job.request_id)

    def _watch_step(self, job: Job, chain: OnChain) -> None:
        """Computes the request, challenges every revealed vote that differs from its own (the oracle's
        `challenge`: a bond and its own claim) and plays those disputes; after the window, finalises
        when its own vote is the one left standing."""
        if chain.status != Status.PENDING:
            self._done(job, self._watched_note(job, chain.status))
            return
        if job.salt is None and not self._compute(job):
            return
        mine = Claim(job.output_hash, Web3.keccak(job.output), job.trace_root)
        self.disputant.play(job.request_id, self.trace(job), mine, from_block=chain.req["requestBlock"], outside=True)
        if chain.now <= chain.req["revealDeadline"] + chain.req["challengeWindow"]:
            return
        if self.open_disputes(job.request_id):
            return  # the games go on: their moves come on the next steps
        call = self.finalize_call(job)
        try:
            call.call({"from": self.account.address})
        except ContractLogicError:  # NoUniqueResult: another vote stands (or none); not ours to finalise
            self._done(job, "watched: the window closed without our output to finalise")
            return
        self._submit(job, "finalize", call, self.reveal_gas(job))

    def _watched_note(self, job: Job, status: Status) -> str:
        if status != Status.FINALIZED:
            return f"watched: closed ({status.name.lower()})"
        logs = self.oracle.events.Finalized().get_logs(from_block=0, argument_filters={"requestId": job.request_id})
        ours = bool(logs) and job.output_hash is not None and bytes(logs[-1]["args"]["outputHash"]) == job.output_hash
        return "watched: finalised with our output" if ours else "watched: finalised with another output"

    def finalize_call(self, job: Job):
        """InferenceOracle.finalize with this node's output (batch_node.py passes the round)."""
        return self.oracle.functions.finalize(job.request_id, job.output_hash, job.trace_root, job.output)

    def open_disputes(self, request_id: int) -> int:
        return call_struct(self.oracle.functions.getRequest(request_id))["openDisputes"]

