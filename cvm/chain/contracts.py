"""The compiled contracts (committed artifacts), deployment, and signed transactions.

Artifacts are JSON files written by ``contracts/compile.js``; the package needs no compiler.
Transactions are signed locally with the sender's key, so the same code drives the embedded
chain and any JSON-RPC node.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import re
from dataclasses import astuple, dataclass
from functools import cache
from pathlib import Path

from eth_account.signers.local import LocalAccount
from eth_utils import function_abi_to_4byte_selector
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError

try:
    from eth_tester.exceptions import TransactionFailed as _TesterFailed
except ImportError:  # a node operator against a JSON-RPC node does not need eth-tester
    _TesterFailed = ContractLogicError

import cvm

log = logging.getLogger(__name__)

ARTIFACTS = Path(__file__).with_name("artifacts")
REVERT_ERRORS = (ContractLogicError, _TesterFailed)
REGISTER_GAS = 1_000_000  # ModelRegistry.register with a long URI and rank-6 specs uses about a third
GAS_MARGIN = 1.25  # estimated gas is multiplied by this, as state may move between estimate and mining


@cache
def load_artifact(name: str, directory: str | Path = ARTIFACTS) -> dict:
    return json.loads((Path(directory) / f"{name}.json").read_text())


def contract_at(w3: Web3, name: str, address: str, directory: str | Path = ARTIFACTS) -> Contract:
    return w3.eth.contract(address=Web3.to_checksum_address(address), abi=load_artifact(name, directory)["abi"])


def call_struct(fn) -> dict:
    """Calls a view returning one struct and gives it as a dict keyed by the Solidity field names."""
    names = [c["name"] for c in fn.abi["outputs"][0]["components"]]
    return dict(zip(names, fn.call()))


class TxFailed(Exception):
    """A transaction that reverted (when estimated or mined). `error` names the custom error."""

    def __init__(self, message: str, error: str | None = None, args: tuple = ()):
        super().__init__(message)
        self.error = error
        self.error_args = args


def error_selectors(abi: list[dict]) -> dict[bytes, dict]:
    return {function_abi_to_4byte_selector(e): e for e in abi if e["type"] == "error"}


def decode_revert(w3: Web3, abi: list[dict], data: bytes | None) -> tuple[str | None, tuple]:
    """Name and arguments of the custom error in revert data, or (None, ()) when not one of `abi`."""
    if not data or len(data) < 4:
        return None, ()
    error = error_selectors(abi).get(data[:4])
    if error is None:
        return None, ()
    types = [i["type"] for i in error["inputs"]]
    return error["name"], tuple(w3.codec.decode(types, data[4:]))


def revert_data(exc: BaseException) -> bytes | None:
    """The raw revert data behind an exception from an estimate or a call, if any.

    JSON-RPC nodes give it to web3 (ContractLogicError.data, hex); eth-tester raises its own
    TransactionFailed, with the py-evm Revert holding the bytes earlier in the exception chain
    (estimates) or only their repr in the message (calls).
    """
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        data = getattr(exc, "data", None)
        if isinstance(data, dict):  # some nodes nest it
            data = data.get("data")
        if isinstance(data, str) and data.startswith("0x"):
            return bytes.fromhex(data[2:])
        if exc.args and isinstance(exc.args[0], bytes):
            return exc.args[0]
        if exc.args and isinstance(exc.args[0], str):  # eth-tester's call path keeps only repr(bytes)
            match = re.search(r"""b(['"]).*\1$""", exc.args[0], re.DOTALL)
            if match:
                with contextlib.suppress(ValueError, SyntaxError):
                    return ast.literal_eval(match.group(0))
        exc = exc.__cause__ or exc.__context__
    return None


def send(
    w3: Web3,
    account: LocalAccount,
    call,
    *,
    value: int = 0,
    gas: int | None = None,
    abi: list[dict] | None = None,
    timeout: float = 120,
) -> dict:
    """Signs, sends and waits for a contract call or constructor; returns the receipt.

    Raises TxFailed naming the custom error when the estimate reverts, or when the mined
    transaction has status 0.
    """
    if abi is None:
        abi = getattr(call, "contract_abi", None) or []
    what = getattr(call, "fn_name", "constructor")
    params = {"from": account.address, "value": value, "chainId": w3.eth.chain_id,
              "nonce": w3.eth.get_transaction_count(account.address, "pending")}
    try:
        if gas is None:
            gas = int(call.estimate_gas(params) * GAS_MARGIN)
        tx = call.build_transaction({**params, "gas": gas})
    except REVERT_ERRORS as e:
        raise _failure(w3, abi, f"{what} would revert", e) from e
    signed = account.sign_transaction(tx)
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    receipt = w3.eth.wait_for_transaction_receipt(tx_hash, timeout=timeout)
    if receipt["status"] != 1:
        message = f"{what} transaction 0x{bytes(tx_hash).hex()} reverted (gas used {receipt['gasUsed']} of {gas})"
        try:  # replay it on the state it ran on to learn why (exact when it was alone in its block)
            w3.eth.call({k: tx[k] for k in ("to", "data", "value", "gas") if k in tx} | {"from": account.address},
                        receipt["blockNumber"] - 1)
        except REVERT_ERRORS as e:
            raise _failure(w3, abi, message, e) from None
        raise TxFailed(message)
    return receipt


def _failure(w3: Web3, abi: list[dict], message: str, exc: BaseException) -> TxFailed:
    name, args = decode_revert(w3, abi, revert_data(exc))
    if name:
        return TxFailed(f"{message}: {name}{args if args else '()'}", name, args)
    return TxFailed(f"{message}: {exc}")


def deploy(w3: Web3, account: LocalAccount, name: str, *args, value: int = 0,
           directory: str | Path = ARTIFACTS) -> tuple[Contract, dict]:
    art = load_artifact(name, directory)
    factory = w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
    receipt = send(w3, account, factory.constructor(*args), value=value, abi=art["abi"])
    return w3.eth.contract(address=receipt["contractAddress"], abi=art["abi"]), receipt


@dataclass(frozen=True)
class OracleConfig:
    """InferenceOracle.Config, in the Solidity field order. withdrawal_delay must exceed
    commit_window + reveal_window + max_challenge_window + 17 * dispute_move_time (the longest
    dispute, DisputeGame.maxDuration)."""

    quorum: int = 2
    committee_size: int = 3
    min_stake: int = 10**18
    slash_amount: int = 5 * 10**17
    min_fee: int = 10**15
    fee_per_gas: int = 10**9  # wei per unit of CVM gas: 1 gwei, as an EVM gas price
    operator_gas_price: int = 10**9  # wei per unit of the operators' chain gas the fee reimburses
    commit_window: int = 300
    reveal_window: int = 300
    withdrawal_delay: int = 86_400
    max_challenge_window: int = 3_600
    dispute_move_time: int = 300
    callback_gas_limit: int = 300_000
    treasury: str = ""

    def as_tuple(self, default_treasury: str) -> tuple:
        values = astuple(self)
        return values[:-1] + (Web3.to_checksum_address(self.treasury or default_treasury),)


@dataclass
class Deployment:
    registry: Contract
    oracle: Contract
    receipts: dict[str, dict]


def deploy_oracle(w3: Web3, account: LocalAccount, config: OracleConfig = OracleConfig(),
                  name: str = "InferenceOracle") -> Deployment:
    """A ModelRegistry, the Solidity Referee and the oracle `name` (InferenceOracle or BatchedOracle,
    which creates its DisputeGame). The Referee is its own contract, passed to the oracle's
    constructor: created inside the game it would push the oracles past EIP-3860's initcode limit."""
    registry, r1 = deploy(w3, account, "ModelRegistry")
    referee, r2 = deploy(w3, account, "Referee")
    oracle, r3 = deploy(w3, account, name, registry.address, referee.address, config.as_tuple(account.address))
    return Deployment(registry, oracle, {"ModelRegistry": r1, "Referee": r2, name: r3})


def tensor_spec(spec) -> tuple[list[int], int]:
    """ModelRegistry.TensorSpec of a cvm TensorSpec: the shape without the batch dimension, bits."""
    return [int(d) for d in spec.shape[1:]], int(spec.bits)


def _calibration_hash(model: cvm.Model, given: bytes | None) -> bytes:
    """`given`, or the model's metadata's calibration hash (zero when it has none)."""
    if given is not None:
        return given
    h = model.meta.get("calibration_hash") or bytes(32)
    return bytes.fromhex(h.removeprefix("0x")) if isinstance(h, str) else h


def register_model(registry: Contract, account: LocalAccount, model: cvm.Model, uri: str = "",
                   calibration_hash: bytes | None = None, salt: bytes | None = None) -> tuple[dict, dict]:
    """Registers `model` by its hash, commit then reveal (ModelRegistry.commitRegistration, then
    register in a later block); the calibration hash defaults to the model's metadata's.
    Returns both receipts."""
    if len(model.outputs) != 1:
        raise ValueError("the registry describes models with one output")
    calibration_hash = _calibration_hash(model, calibration_hash)
    salt = os.urandom(32) if salt is None else salt
    commitment = registry.functions.registrationCommitment(model.hash, account.address, salt).call()
    committed = send(registry.w3, account, registry.functions.commitRegistration(commitment))
    # several inputs (spec section 11: concatenated in model input order) go through registerInputs
    inputs = ((registry.functions.register, tensor_spec(model.inputs[0])) if len(model.inputs) == 1 else
              (registry.functions.registerInputs, [tensor_spec(s) for s in model.inputs]))
    call = inputs[0](model.hash, uri or f"cvm:{model.hash.hex()}", inputs[1], tensor_spec(model.outputs[0]),
                     int(model.gas), calibration_hash, salt)
    # an explicit limit: some nodes (anvil) estimate in the latest block, the commitment's own, where
    # register reverts with RegistrationTooEarly; it is mined in a later block, where it succeeds
    return committed, send(registry.w3, account, call, gas=REGISTER_GAS)


def register_listing(registry: Contract, account: LocalAccount, model: cvm.Model, uri: str = "",
                     calibration_hash: bytes | None = None) -> tuple[bytes, dict]:
    """`account`'s own listing of `model` (ModelRegistry.registerListing, one transaction): what a
    model's users publish when someone else holds the listing whose id is the model hash. Returns the
    listing id (requests name it as their modelHash) and the receipt."""
    if len(model.outputs) != 1:
        raise ValueError("the registry describes models with one output")
    calibration_hash = _calibration_hash(model, calibration_hash)
    call = registry.functions.registerListing(model.hash, uri or f"cvm:{model.hash.hex()}",
                                              [tensor_spec(s) for s in model.inputs], tensor_spec(model.outputs[0]),
                                              int(model.gas), calibration_hash)
    receipt = send(registry.w3, account, call, gas=REGISTER_GAS)
    return bytes(registry.functions.listingId(model.hash, account.address).call()), receipt
