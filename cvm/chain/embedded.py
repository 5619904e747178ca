"""The embedded chain: py-evm (Prague) with the CVM precompile, in process, behind web3.

    chain = EmbeddedChain(ModelStore("models/"))
    w3 = chain.w3                      # a web3.Web3 on eth-tester's PyEVMBackend
    key = chain.keys[0]                # funded accounts with their private keys

Every transaction is mined in its own block (eth-tester's auto-mining). Chain time is the chain's
own: each block is one second after its parent, never read from the wall clock, and
``advance_time`` moves it forward for deadlines. A test sees the same timestamps on a busy machine
as on a quiet one.
"""

from __future__ import annotations

from eth.abc import SignedTransactionAPI, StateAPI
from eth.vm.forks.prague import PragueVM
from eth.vm.forks.prague.computation import PragueComputation
from eth.vm.forks.prague.state import PragueState
from eth.vm.spoof import SpoofTransaction
from eth_account import Account
from eth_account.signers.local import LocalAccount
from eth_tester import EthereumTester, PyEVMBackend
from web3 import Web3
from web3.providers.eth_tester import EthereumTesterProvider

from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS, make_cvm_precompile
from cvm.chain.store import ModelStore
from cvm.chain.trace_precompile import CVM_TRACE_ADDRESS, make_trace_precompile

BLOCK_GAS_LIMIT = 1_000_000_000  # room for large models through the precompile
NUM_ACCOUNTS = 10
BLOCK_TIME = 1  # seconds from a block to the next (advance_time adds more)
ESTIMATE_TOLERANCE = 1_000  # gas: an estimate is at most this much above the least that succeeds


def cvm_vm_class(precompile, trace_precompile=None) -> type[PragueVM]:
    """A Prague VM whose precompiles also hold `precompile` at CVM_PRECOMPILE_ADDRESS and the dispute
    game's `trace_precompile` at CVM_TRACE_ADDRESS."""
    precompiles = {**PragueComputation.get_precompiles(), CVM_PRECOMPILE_ADDRESS: precompile}
    if trace_precompile is not None:
        precompiles[CVM_TRACE_ADDRESS] = trace_precompile
    computation = type("CVMPragueComputation", (PragueComputation,), {"_precompiles": precompiles})
    state = type("CVMPragueState", (PragueState,), {"computation_class": computation})
    return type("CVMPragueVM", (PragueVM,), {"_state_class": state,
                                             "create_header_from_parent": staticmethod(header_after)})


def header_after(parent, **params):
    """PragueVM's next header, BLOCK_TIME after its parent: py-evm would take the wall clock when it is
    later, so a slow step between two blocks moved chain time and made advance_time's target (computed
    from the latest block) fall behind the pending block's ("Space time continuum distortion")."""
    if parent is not None:
        params.setdefault("timestamp", parent.timestamp + BLOCK_TIME)
    return PragueVM.create_header_from_parent(parent, **params)


def estimate_gas(state: StateAPI, transaction: SignedTransactionAPI) -> int:
    """A gas estimator for py-evm that needs a handful of runs instead of a ~30-step bisection
    from the block gas limit: run at the limit to learn the gas used, grow from there until the
    transaction succeeds (the 63/64 rule and explicit gasleft() checks need more than is used),
    then bisect down to within ESTIMATE_TOLERANCE."""

    def run(gas: int):
        snapshot = state.snapshot()
        try:
            return state.apply_transaction(SpoofTransaction(transaction, gas=gas))
        finally:
            state.revert(snapshot)

    at_limit = run(state.gas_limit)
    if at_limit.is_error:
        raise at_limit.error
    lo = transaction.intrinsic_gas + at_limit.get_gas_used() - 1  # less always fails
    hi = min(state.gas_limit, (lo + 1) * 64 // 63 + 2_300)
    while run(hi).is_error:
        lo, hi = hi, min(state.gas_limit, 2 * hi)
    while hi - lo > ESTIMATE_TOLERANCE:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if run(mid).is_error else (lo, mid)
    return hi


class EmbeddedChain:
    def __init__(self, store: ModelStore, backend: str = "numba", num_accounts: int = NUM_ACCOUNTS):
        self.store = store
        vm = cvm_vm_class(make_cvm_precompile(store, backend=backend), make_trace_precompile(store))
        genesis = PyEVMBackend.generate_genesis_params(overrides={"gas_limit": BLOCK_GAS_LIMIT})
        state = PyEVMBackend.generate_genesis_state(num_accounts=num_accounts)
        self.backend = PyEVMBackend(
            genesis_parameters=genesis, genesis_state=state, vm_configuration=((0, vm),)
        )
        type(self.backend.chain).gas_estimator = staticmethod(estimate_gas)  # a class made for this chain
        self.backend.chain.gas_estimator = estimate_gas
        self.tester = EthereumTester(self.backend)
        self.w3 = Web3(EthereumTesterProvider(self.tester))
        self.keys: list[LocalAccount] = [
            Account.from_key(k.to_bytes()) for k in self.backend.account_keys
        ]

    def timestamp(self) -> int:
        return self.w3.eth.get_block("latest")["timestamp"]

    def mine(self, blocks: int = 1) -> None:
        self.tester.mine_blocks(blocks)

    def advance_time(self, seconds: int) -> None:
        """Moves chain time so that the next block, the one the next transaction lands in, is `seconds`
        (at least BLOCK_TIME) after the latest one; eth-tester mines a block one second before it."""
        if seconds < BLOCK_TIME:
            raise ValueError(f"chain time only moves forward: {seconds} s is less than a block ({BLOCK_TIME} s)")
        self.tester.time_travel(self.timestamp() + seconds)
