"""The oracle's hashing rules that a node mirrors, and the node's SQLite rows.

`commitment` is InferenceOracle.commitmentFor, `is_drawn` InferenceOracle.isDrawn (tests compare
them with the contract); `Job` is one row of the node's `requests` table, `OnChain` what the chain
says of one request when the node moves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from web3 import Web3
from web3.exceptions import Web3Exception

from cvm.chain.states import Status, sql_check

RPC_ERRORS = (Web3Exception, ConnectionError, TimeoutError, OSError)  # a node's failed reads: retried later

SCHEMA = f"""
CREATE TABLE IF NOT EXISTS requests (
    request_id  INTEGER PRIMARY KEY,
    model_hash  BLOB NOT NULL,
    input       BLOB NOT NULL,
    state       TEXT NOT NULL {sql_check()},
    output      BLOB,
    output_hash BLOB,
    salt        BLOB,
    trace_root  BLOB,
    commit_tx   TEXT,
    reveal_tx   TEXT,
    attempts    INTEGER NOT NULL DEFAULT 0,
    note        TEXT,
    updated     REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

@dataclass
class Job:
    request_id: int
    model_hash: bytes
    input: bytes
    state: str
    output: bytes | None
    output_hash: bytes | None
    salt: bytes | None
    trace_root: bytes | None
    commit_tx: str | None
    reveal_tx: str | None
    attempts: int
    note: str | None


@dataclass(frozen=True)
class OnChain:
    """What the chain says of one request and of this operator's submission to it, read once a step."""
    req: dict
    status: Status
    commits: int
    committee: int
    commitment: bytes  # this operator's commitment (ZERO32 if none)
    vote: bytes  # this operator's revealed vote (ZERO32 if none)
    now: int  # the latest block's timestamp


MAX_COMMITTEE = 16  # OracleCore.MAX_COMMITTEE: seats of one request (every drawn operator that commits)


def is_drawn(block_hash: bytes, request_id: int, operator: str, weight: int, staked_at: int, request_block: int,
             total_stake: int, committee_size: int) -> bool:
    """InferenceOracle.isDrawn: keccak256(abi.encode(seed, operator)) mod totalStake < weight * n, with
    seed = keccak256(abi.encode(blockhash(requestBlock), requestId)), for stake older than the request."""
    if weight == 0 or staked_at >= request_block or total_stake == 0:
        return False
    codec = Web3().codec
    seed = Web3.keccak(codec.encode(["bytes32", "uint256"], [block_hash, request_id]))
    ticket = int.from_bytes(Web3.keccak(codec.encode(["bytes32", "address"], [seed, operator])), "big")
    return ticket % total_stake < weight * committee_size


def bond_free(operator: tuple, commits_in_flight: int, slash_amount: int) -> bool:
    """Whether the stake (InferenceOracle.operators: stake, unlockTime, stakedAt, locked) has a free bond
    for one more commit, counting the commits in flight, whose bonds the chain locks only when they
    are mined: a commit without one would revert with InsufficientFreeStake."""
    stake, _, _, locked = operator
    return stake - locked - commits_in_flight * slash_amount >= slash_amount


def commitment(request_id: int, output_hash: bytes, trace_root: bytes, salt: bytes, operator: str,
               output: bytes) -> bytes:
    """keccak256(abi.encode(requestId, outputHash, keccak256(output), traceRoot, salt, operator)), as
    InferenceOracle.commitmentFor: the output bytes are bound, so nobody who submits an opening can
    make other bytes finalise."""
    encoded = Web3().codec.encode(["uint256", "bytes32", "bytes32", "bytes32", "bytes32", "address"],
                                  [request_id, output_hash, Web3.keccak(output), trace_root, salt, operator])
    return Web3.keccak(encoded)
