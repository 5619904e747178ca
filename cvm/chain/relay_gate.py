"""Who may post to the relay (cvm/chain/relay.py): the checks a message passes before the board keeps
it, all read from the chain, so the relay trusts nobody and holds no key.

* A commit is an operator's EIP-712 signature over Commit(requestId, commitment) (what
  BatchedOracle.commitSigned takes): it must recover to the operator it names, on this chain, for an
  oracle the relay serves, on a pending request whose draw holds that operator (`isDrawn`) before the
  commit deadline.
* An opening is signed the same way (batch.sign_opening, Open(...)): it must recover to the operator it
  names, that operator must hold a seat in the request, and the opening must open that seat's
  commitment on chain (so nothing but the committed output can be posted under its name).

So throwaway keys cannot fill a request's slots, and no party can post under another's name or
replace another's message. The board bounds the rest (entries per request and per key).
"""

from __future__ import annotations

import threading

from web3 import Web3

from cvm.chain.batch import Round, StaleRound, latest_round, opening_signer, signer_of
from cvm.chain.contracts import contract_at
from cvm.chain.eligibility import drawn_at
from cvm.chain.protocol import commitment
from cvm.chain.states import Status


class Refused(ValueError):
    """A message the relay does not keep, with the reason (the HTTP answer's error)."""


class Gate:
    def __init__(self, w3: Web3, oracles: list[str]):
        """Reads nothing yet: the relay may start before its chain answers."""
        self.w3 = w3
        self._chain_id: int | None = None
        self.oracles = {Web3.to_checksum_address(a): contract_at(w3, "BatchedOracle", a) for a in oracles}
        self._blocks: dict[tuple[str, int], int] = {}  # (oracle, request) -> block of its request
        self._terms: dict[str, tuple[int, int]] = {}  # oracle -> (minStake, committeeSize)
        self._lock = threading.Lock()  # one chain read at a time (the server answers on many threads)

    def check(self, kind: str, msg: dict) -> str:
        """The operator a message may be kept for (checksummed), or Refused."""
        oracle = self._oracle(msg)
        operator = Web3.to_checksum_address(msg["operator"])
        if self._chain_id is None:
            self._chain_id = self.w3.eth.chain_id
        if int(msg["chainId"]) != self.chain_id:
            raise Refused(f"chain {msg['chainId']} is not this relay's ({self.chain_id})")
        signer = signer_of(self.chain_id, oracle.address, int(msg["requestId"]), msg) if kind == "commits" \
            else opening_signer(msg)
        if signer != operator:
            raise Refused(f"the signature is {signer}'s, not {operator}'s")
        with self._lock:
            r = self._round(oracle, int(msg["requestId"]))
            if kind == "commits":
                self._check_commit(oracle, r, operator)
            else:
                self._check_opening(r, operator, msg)
        return operator

    @property
    def chain_id(self) -> int:
        return self._chain_id

    def _oracle(self, msg: dict):
        address = Web3.to_checksum_address(msg["oracle"])
        if address not in self.oracles:
            raise Refused(f"this relay does not serve oracle {address}")
        return self.oracles[address]

    def _round(self, oracle, rid: int) -> Round:
        key = (oracle.address, rid)
        if key not in self._blocks:
            logs = oracle.events.InferenceRequested().get_logs(from_block=0, argument_filters={"requestId": rid})
            if not logs:
                raise Refused(f"request {rid} is unknown to the oracle")
            self._blocks[key] = logs[0]["blockNumber"]
        try:
            return latest_round(oracle, rid, from_block=self._blocks[key])
        except StaleRound as e:
            raise Refused(f"request {rid}'s round is not readable yet ({e}): post again") from e

    def _check_commit(self, oracle, r: Round, operator: str) -> None:
        if r.status != Status.PENDING or self.w3.eth.get_block("latest")["timestamp"] > r.fields["commitDeadline"]:
            raise Refused(f"request {r.request_id} takes no more commits")
        if not self._drawn(oracle, r, operator):
            raise Refused(f"{operator} is not drawn for request {r.request_id}")

    def _drawn(self, oracle, r: Round, operator: str) -> bool:
        """BatchedOracle.isDrawn, as the node computes it (eligibility.drawn_at)."""
        if oracle.address not in self._terms:  # immutables
            self._terms[oracle.address] = (oracle.functions.minStake().call(), oracle.functions.committeeSize().call())
        min_stake, committee = self._terms[oracle.address]
        record = oracle.functions.operators(operator).call()
        return drawn_at(self.w3, r.request_id, r.fields, operator, record, min_stake, committee)

    def _check_opening(self, r: Round, operator: str, msg: dict) -> None:
        b = lambda k: bytes.fromhex(msg[k][2:])  # noqa: E731
        mine = r.commitment_of(operator)
        if mine is None:
            raise Refused(f"{operator} holds no unrevealed seat in request {r.request_id}")
        if commitment(r.request_id, b("outputHash"), b("traceRoot"), b("salt"), operator, b("output")) != mine:
            raise Refused(f"the opening does not open {operator}'s commitment")
