"""A party of the oracle's dispute game: opens disputes against other revealers' votes and makes its
moves from its own trace, reading the chain each time (so it is restartable and keeps no state).

    d = Disputant(w3, account, oracle)
    d.open(request_id, defender, my_claim, their_claim)    # -> dispute id
    d.move(dispute_id, trace)                               # one move if one is due: bisect / step / output
    d.play(request_id, trace, my_claim)                     # the node's per-step hook: open and move

The game (contracts/src/DisputeGame.sol) bisects the two trace roots to the first differing leaf,
then anyone re-executes that leaf on chain; `move` resolves it with this party's own tensors and
Merkle proofs, which are the true ones when this party is honest. Without the trace precompile the
game goes on inside that leaf's tensor and the Solidity referee recomputes one element: those moves
are cvm/chain/referee.py's `move`.

One player for both oracles: what differs between InferenceOracle and BatchedOracle (the
`openDispute` call, which takes the round as calldata on the batched one, and where the request's
dispute window ends) are the two methods `open_call` and `window_end`; cvm/chain/batch_node.py's
BatchedDisputant overrides them. Everything else (events, `refuted`, `disputed`, the game) is
OracleCore's and the same on both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract

from cvm.chain import referee
from cvm.chain.contracts import call_struct, contract_at, send
from cvm.chain.trace import Trace, merkle_proof

log = logging.getLogger("cvm.dispute")

ZERO32 = bytes(32)
MOVE_GAS = 400_000  # a bisection move; a step adds the node's CVM gas (see step_gas)


class Phase(IntEnum):
    """DisputeGame.Phase"""
    NONE = 0
    BISECT = 1
    STEP = 2
    OUTPUT = 3
    RESOLVED = 4
    INNER = 5  # referee: bisecting the disputed tensor's words
    ELEMENT = 6  # referee: one element recomputed


@dataclass(frozen=True)
class Claim:
    """What a revealer claimed (InferenceOracle's Revealed event): its vote hashes exactly this."""
    output_hash: bytes
    output_keccak: bytes
    trace_root: bytes

    def as_tuple(self) -> tuple:
        return (self.output_hash, self.output_keccak, self.trace_root)


class Disputant:
    def __init__(self, w3: Web3, account: LocalAccount, oracle: Contract, send=send):
        """`send(w3, account, call, gas=...)` -> receipt; the node passes its own, which shares its nonces."""
        self.w3, self.account, self.oracle, self.send = w3, account, oracle, send
        self.game = contract_at(w3, "DisputeGame", oracle.functions.disputeGame().call())

    def claims(self, request_id: int, from_block: int = 0) -> dict[str, Claim]:
        """Every revealer's claim, from the Revealed events."""
        events = self.oracle.events.Revealed().get_logs(from_block=from_block, argument_filters={"requestId": request_id})
        return {e["args"]["operator"]: Claim(bytes(e["args"]["outputHash"]), bytes(e["args"]["outputKeccak"]),
                                             bytes(e["args"]["traceRoot"])) for e in events}

    def disputes(self, request_id: int, from_block: int = 0) -> list[int]:
        events = self.oracle.events.DisputeOpened().get_logs(from_block=from_block,
                                                              argument_filters={"requestId": request_id})
        return [e["args"]["disputeId"] for e in events]

    def open_call(self, request_id: int, defender: str, mine: Claim, theirs: Claim, outside: bool = False):
        """The oracle's openDispute call (InferenceOracle's signature), or `challenge` for an operator
        without a seat (the optimistic path: it locks a bond and claims its own output and trace)."""
        fn = self.oracle.functions.challenge if outside else self.oracle.functions.openDispute
        return fn(request_id, defender, mine.as_tuple(), theirs.as_tuple())

    def window_end(self, request_id: int) -> int:
        """The last timestamp at which the request's votes may be disputed: its reveal deadline plus
        its challenge window."""
        req = call_struct(self.oracle.functions.getRequest(request_id))
        return req["revealDeadline"] + req["challengeWindow"]

    def open(self, request_id: int, defender: str, mine: Claim, theirs: Claim, outside: bool = False) -> int:
        call = self.open_call(request_id, defender, mine, theirs, outside)
        # estimated: opening records both votes' revealers (a slot each), so its gas grows with the committee
        gas = call.estimate_gas({"from": self.account.address}) * 6 // 5 + 50_000
        receipt = self.send(self.w3, self.account, call, gas=gas)
        dispute_id = self.oracle.events.DisputeOpened().process_receipt(receipt)[0]["args"]["disputeId"]
        log.info("request %d: opened dispute %d against %s", request_id, dispute_id, defender)
        return dispute_id

    def move(self, dispute_id: int, trace: Trace) -> str | None:
        """Makes this party's next move in the dispute, if one is due; returns what it did."""
        d = call_struct(self.game.functions.getDispute(dispute_id))
        phase, me = Phase(d["phase"]), self.account.address
        if phase not in (Phase.NONE, Phase.RESOLVED) and self.w3.eth.get_block("latest")["timestamp"] > d["deadline"]:
            self.send(self.w3, self.account, self.game.functions.timeout(dispute_id), gas=MOVE_GAS)
            return "timeout"
        if phase in (Phase.INNER, Phase.ELEMENT) or (phase == Phase.STEP and (d["referee"] or d["index"] == 0)):
            return referee.move(self, dispute_id, d, trace)  # and leaf 0, whose word root needs the input
        if phase == Phase.BISECT and me in (d["challenger"], d["defender"]):
            moved = d["movedC"] if me == d["challenger"] else d["movedD"]
            if moved:
                return None
            left, right = trace.children(d["level"], d["index"])
            self.send(self.w3, self.account, self.game.functions.bisect(dispute_id, left, right), gas=MOVE_GAS)
            return "bisect"
        if phase == Phase.STEP:
            data, proofs = trace.step_inputs(d["index"]) if 0 < d["index"] < len(trace.tensors) else (b"", [])
            gas = MOVE_GAS + 16 * len(data) + 4 * step_gas(trace, d["index"])
            self.send(self.w3, self.account, self.game.functions.resolveStep(dispute_id, data, proofs), gas=gas)
            return "step"
        if phase == Phase.OUTPUT:
            out_leaf = d["outputLeaf"]
            output = trace.model.encode_output(trace.output)
            call = self.game.functions.resolveOutput(dispute_id, output, merkle_proof(trace.levels, out_leaf))
            self.send(self.w3, self.account, call, gas=MOVE_GAS + 40 * len(output))
            return "output"
        return None

    def play(self, request_id: int, trace: Trace, mine: Claim, from_block: int = 0, outside: bool = False) -> None:
        """Moves in every open dispute of the request, then disputes each different unrefuted vote that
        none of its own open games is already disputing (a game lost by a timeout refutes nothing, so
        the vote's next revealer is disputed then). `outside`: this operator holds no seat, and
        challenges instead (a bond locked per game)."""
        busy = set()
        for dispute_id in self.disputes(request_id, from_block):
            self.move(dispute_id, trace)
            d = call_struct(self.game.functions.getDispute(dispute_id))
            if d["challenger"] == self.account.address and Phase(d["phase"]) != Phase.RESOLVED:
                busy.add(bytes(d["voteD"]))
        my_vote = vote_of(mine)
        if self.w3.eth.get_block("latest")["timestamp"] > self.window_end(request_id):
            return
        for operator, claim in self.claims(request_id, from_block).items():
            theirs = vote_of(claim)
            if theirs in busy or theirs == my_vote or self.oracle.functions.refuted(request_id, theirs).call():
                continue
            if self.oracle.functions.disputed(request_id, dispute_key(my_vote, theirs, self.account.address,
                                                                      operator)).call():
                continue
            dispute_id = self.open(request_id, operator, mine, claim, outside)
            busy.add(theirs)
            self.move(dispute_id, trace)


def step_gas(trace: Trace, index: int) -> int:
    names = len(trace.model.graph.inputs)
    if not names <= index < len(trace.tensors):
        return 0
    return int(trace.model.analysis.node_costs[index - names])


def vote_of(claim: Claim) -> bytes:
    """keccak256(abi.encode(outputHash, outputKeccak, traceRoot)): the oracle's vote."""
    return Web3.keccak(Web3().codec.encode(["bytes32"] * 3, list(claim.as_tuple())))


def dispute_key(a: bytes, b: bytes, challenger: str, defender: str) -> bytes:
    """OracleCore._disputeKey: one dispute per vote pair and pair of players."""
    lo, hi = sorted((a, b))
    return Web3.keccak(Web3().codec.encode(["bytes32", "bytes32", "address", "address"], [lo, hi, challenger, defender]))
