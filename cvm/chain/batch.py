"""What a client of BatchedOracle needs: the current round of a request, the EIP-712 commit signature,
the calls that take the round back as calldata, and the deployment.

BatchedOracle stores one word per request, keccak256(abi.encode(round)) with the status in its lowest
byte, and emits `RoundUpdated(requestId, round)` on every change; `latest_round` reads the last one
and checks it against the stored word (a reorg or a log the node has not seen yet shows as a
mismatch, and the caller reads again later). Every state-changing call passes that round back.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_account.signers.local import LocalAccount
from web3 import Web3
from web3.contract import Contract

from cvm.chain.contracts import Deployment, OracleConfig, deploy_oracle
from cvm.chain.states import Status

# BatchedOracle.Round, in the Solidity field order (the tuple a call takes)
ROUND_FIELDS = ("modelHash", "inputHash", "requester", "callback", "fee", "totalStake", "bond", "requestBlock",
                "commitDeadline", "challengeWindow", "outputBytes", "status", "settled", "revealedMask",
                "bondedMask", "agreedMask", "committers", "words")
LOG_CHUNK = 2_000
# BatchedOracle._packed: (field, bytes) of the fixed part, big-endian
PACKED = (("modelHash", 32), ("inputHash", 32), ("requester", 20), ("callback", 20), ("fee", 16),
          ("totalStake", 16), ("bond", 16), ("requestBlock", 8), ("commitDeadline", 8), ("challengeWindow", 8),
          ("outputBytes", 4), ("status", 1), ("settled", 1), ("revealedMask", 2), ("bondedMask", 2),
          ("agreedMask", 2))


class StaleRound(RuntimeError):
    """The logs read so far do not give the round the chain stores (not indexed yet, or a reorg)."""


@dataclass(frozen=True)
class Round:
    """One request's state as BatchedOracle hashes it; `call` is the tuple a call takes."""
    request_id: int
    fields: dict

    @property
    def call(self) -> tuple:
        f = self.fields
        return tuple(list(f[k]) if k in ("committers", "words") else f[k] for k in ROUND_FIELDS)

    @property
    def status(self) -> Status:
        return Status(self.fields["status"])

    @property
    def committers(self) -> list[str]:
        return list(self.fields["committers"])

    def seat(self, operator: str) -> int | None:
        return next((i for i, a in enumerate(self.committers) if a.lower() == operator.lower()), None)

    def revealed(self, i: int) -> bool:
        return bool(self.fields["revealedMask"] >> i & 1)

    def word(self, i: int) -> bytes:
        return bytes(self.fields["words"][i])

    def commitment_of(self, operator: str) -> bytes | None:
        """The operator's commitment while unrevealed (None: no seat, or revealed)."""
        i = self.seat(operator)
        return None if i is None or self.revealed(i) else self.word(i)

    def vote_of(self, operator: str) -> bytes | None:
        i = self.seat(operator)
        return self.word(i) if i is not None and self.revealed(i) else None

    def votes(self, vote: bytes) -> int:
        return sum(self.revealed(i) and self.word(i) == vote for i in range(len(self.committers)))

    def reveal_deadline(self, reveal_window: int) -> int:
        return self.fields["commitDeadline"] + reveal_window

    def reveal_open(self, now: int) -> bool:
        """BatchedOracle.reveal's rule: the commit deadline passed (seats are drawn until then)."""
        return now > self.fields["commitDeadline"]

    def result(self) -> bytes | None:
        mask = self.fields["agreedMask"]
        return None if mask == 0 else self.word((mask & -mask).bit_length() - 1)


def unpack_round(request_id: int, data: bytes) -> Round:
    """A RoundUpdated log's round (BatchedOracle._packed)."""
    fields, at = {}, 0
    for name, size in PACKED:
        raw = data[at:at + size]
        at += size
        if name in ("modelHash", "inputHash"):
            fields[name] = raw
        elif name in ("requester", "callback"):
            fields[name] = Web3.to_checksum_address(raw)
        elif name == "settled":
            fields[name] = raw != b"\0"
        else:
            fields[name] = int.from_bytes(raw, "big")
    n = data[at]
    at += 1
    fields["committers"] = [Web3.to_checksum_address(data[at + 20 * i:at + 20 * i + 20]) for i in range(n)]
    at += 20 * n
    fields["words"] = [data[at + 32 * i:at + 32 * i + 32] for i in range(n)]
    if at + 32 * n != len(data):
        raise ValueError(f"a packed round of {n} committers is {at + 32 * n} bytes, not {len(data)}")
    return Round(request_id, fields)


def latest_round(oracle: Contract, request_id: int, from_block: int = 0) -> Round:
    """The request's round from its last RoundUpdated log, checked against the stored word."""
    stored = bytes(oracle.functions.roundKey(request_id).call())
    if stored == bytes(32):
        raise StaleRound(f"request {request_id} is unknown to the oracle")
    event = oracle.events.RoundUpdated()
    latest, found = oracle.w3.eth.block_number, None
    start = from_block
    while start <= latest:
        end = min(start + LOG_CHUNK - 1, latest)
        logs = event.get_logs(from_block=start, to_block=end, argument_filters={"requestId": request_id})
        if logs:
            found = max(logs, key=lambda e: (e["blockNumber"], e["logIndex"]))
        start = end + 1
    if found is None:
        raise StaleRound(f"no RoundUpdated log of request {request_id} yet")
    r = unpack_round(request_id, bytes(found["args"]["round"]))
    if bytes(oracle.functions.keyOf(r.call).call()) != stored:
        raise StaleRound(f"the last RoundUpdated log of request {request_id} is not the stored round yet")
    return r


def round_from_receipt(oracle: Contract, receipt) -> Round:
    """The round a transaction left (its last RoundUpdated log)."""
    from web3.logs import DISCARD

    ev = oracle.events.RoundUpdated().process_receipt(receipt, errors=DISCARD)[-1]
    return unpack_round(ev["args"]["requestId"], bytes(ev["args"]["round"]))


def _domain(chain_id: int, oracle: str) -> bytes:
    """BatchedOracle's EIP-712 domain separator (name "CVM BatchedOracle", version "1")."""
    return Web3.keccak(Web3().codec.encode(
        ["bytes32", "bytes32", "bytes32", "uint256", "address"],
        [Web3.keccak(text="EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
         Web3.keccak(text="CVM BatchedOracle"), Web3.keccak(text="1"), chain_id, oracle]))


def commit_digest(chain_id: int, oracle: str, request_id: int, commitment: bytes) -> bytes:
    """BatchedOracle.commitDigest: the EIP-712 digest of Commit(requestId, commitment)."""
    struct = Web3.keccak(Web3().codec.encode(["bytes32", "uint256", "bytes32"],
                                             [Web3.keccak(text="Commit(uint256 requestId,bytes32 commitment)"),
                                              request_id, commitment]))
    return Web3.keccak(b"\x19\x01" + _domain(chain_id, oracle) + struct)


OPEN_TYPE = "Open(uint256 requestId,bytes32 outputHash,bytes32 outputKeccak,bytes32 traceRoot,bytes32 salt)"


def open_digest(chain_id: int, oracle: str, request_id: int, output_hash: bytes, output: bytes, trace_root: bytes,
                salt: bytes) -> bytes:
    """The EIP-712 digest an operator signs to post its opening to the relay (the relay's proof of who
    posted it; the oracle needs no signature: the opening proves itself against the commitment)."""
    struct = Web3.keccak(Web3().codec.encode(
        ["bytes32", "uint256", "bytes32", "bytes32", "bytes32", "bytes32"],
        [Web3.keccak(text=OPEN_TYPE), request_id, output_hash, Web3.keccak(output), trace_root, salt]))
    return Web3.keccak(b"\x19\x01" + _domain(chain_id, oracle) + struct)


def _hex(b: bytes) -> str:
    return "0x" + bytes(b).hex()


def sign_opening(account: LocalAccount, chain_id: int, oracle: str, request_id: int, output_hash: bytes,
                 output: bytes, trace_root: bytes, salt: bytes) -> dict:
    """An operator's opening as the relay takes it (POST /open), signed."""
    sig = account.unsafe_sign_hash(open_digest(chain_id, oracle, request_id, output_hash, output, trace_root, salt))
    return {"oracle": oracle, "chainId": chain_id, "requestId": request_id, "operator": account.address,
            "outputHash": _hex(output_hash), "traceRoot": _hex(trace_root), "salt": _hex(salt), "output": _hex(output),
            "v": sig.v, "r": _hex(sig.r.to_bytes(32, "big")), "s": _hex(sig.s.to_bytes(32, "big"))}


def opening_signer(msg: dict) -> str:
    """Who signed a posted opening."""
    from eth_account import Account

    b = lambda k: bytes.fromhex(msg[k][2:])  # noqa: E731
    digest = open_digest(int(msg["chainId"]), Web3.to_checksum_address(msg["oracle"]), int(msg["requestId"]),
                         b("outputHash"), b("output"), b("traceRoot"), b("salt"))
    return Account._recover_hash(digest, vrs=(msg["v"], int(msg["r"], 16), int(msg["s"], 16)))


def sign_commit(account: LocalAccount, chain_id: int, oracle: str, request_id: int, commitment: bytes) -> dict:
    """An operator's signed commit, as the relay carries it and commitSigned takes it."""
    sig = account.unsafe_sign_hash(commit_digest(chain_id, oracle, request_id, commitment))
    return {"operator": account.address, "commitment": "0x" + commitment.hex(), "v": sig.v,
            "r": "0x" + sig.r.to_bytes(32, "big").hex(), "s": "0x" + sig.s.to_bytes(32, "big").hex()}


def signed_commit_tuple(signed: dict) -> tuple:
    """BatchedOracle.SignedCommit for a call."""
    return (bytes.fromhex(signed["commitment"][2:]), signed["v"], bytes.fromhex(signed["r"][2:]),
            bytes.fromhex(signed["s"][2:]))


def signer_of(chain_id: int, oracle: str, request_id: int, signed: dict) -> str:
    """Who signed a commit (what commitSigned will commit)."""
    from eth_account import Account

    digest = commit_digest(chain_id, oracle, request_id, bytes.fromhex(signed["commitment"][2:]))
    return Account._recover_hash(digest, vrs=(signed["v"], int(signed["r"], 16), int(signed["s"], 16)))


def opening_tuple(operator: str, output_hash: bytes, trace_root: bytes, salt: bytes) -> tuple:
    """BatchedOracle.Opening for a call."""
    return (operator, output_hash, trace_root, salt)


def deploy_batched_oracle(w3: Web3, account: LocalAccount, config: OracleConfig | None = None) -> Deployment:
    """A ModelRegistry and a BatchedOracle (with its DisputeGame) configured like deploy_oracle's."""
    return deploy_oracle(w3, account, config or OracleConfig(), "BatchedOracle")
