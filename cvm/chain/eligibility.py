"""What an operator checks before it works on a request, apart from the run itself: whether it serves
the model at all (registered at its static gas, so the fee covers the work; on a chain without the
trace precompile, with the model's referee commitment published and right) and whether the
stake-weighted draw picked it. Reads the chain; caches what cannot change (registered gas, a passed
referee check)."""
from __future__ import annotations

import cvm
from cvm.chain import model_commitment
from cvm.chain.contracts import call_struct
from cvm.chain.protocol import RPC_ERRORS, is_drawn


class Eligibility:
    def __init__(self, w3, registry, address: str, min_stake: int, committee_size: int):
        self.w3, self.registry, self.address = w3, registry, address
        self.min_stake, self.committee_size = min_stake, committee_size
        self._registered_gas: dict[bytes, int] = {}  # listing id -> the gas its publisher registered
        self._files: dict[bytes, bytes] = {}  # listing id -> the model hash it lists

    def model_file(self, listing: bytes) -> bytes:
        """The model hash a request's listing (its modelHash) lists: ModelRegistry.modelHashOf, which
        never changes for a listing of a file."""
        listing = bytes(listing)
        if listing not in self._files:
            self._files[listing] = bytes(self.registry.functions.modelHashOf(listing).call())
        return self._files[listing]

    def refusal(self, model: cvm.Model, listing: bytes | None = None) -> str | None:
        """None when the operator serves `model` on `listing` (a registry listing id, the request's
        modelHash; the model hash by default), else the one-line reason it does not. RPC errors
        propagate (the request is retried)."""
        h = bytes(model.hash if listing is None else listing)
        if h not in self._registered_gas:  # set once at registration
            self._registered_gas[h] = call_struct(self.registry.functions.getModel(h))["gas"]
        if self._registered_gas[h] != model.gas:  # the fee is priced from the registered gas
            return (f"model {h.hex()[:12]} is registered with gas {self._registered_gas[h]}, but its static cost is "
                    f"{model.gas}: not served")
        try:  # the listing's file and specs; without the trace precompile its referee commitment, right
            model_commitment.require_served(self.w3, self.registry, model, h)
        except model_commitment.RefereeMismatch as e:
            return f"not served: {e}"
        return None

    def drawn(self, request_id: int, req: dict, operator: tuple) -> bool | None:
        """Whether the stake-weighted draw picked this operator (`drawn_at`); None while the request's
        block is not sealed."""
        try:
            return drawn_at(self.w3, request_id, req, self.address, operator, self.min_stake, self.committee_size)
        except RPC_ERRORS:
            return None


def drawn_at(w3, request_id: int, req: dict, address: str, operator: tuple, min_stake: int, committee_size: int) -> bool:
    """InferenceOracle.isDrawn for `address`, whose record (InferenceOracle.operators: stake, unlock
    time, stake block, locked) is `operator`, computed here from the sealed request block's hash (a
    call may run in that very block, where the seed is not known yet). `req` holds the request's
    requestBlock and totalStake (the node's and the relay's view of it alike)."""
    block_hash = bytes(w3.eth.get_block(req["requestBlock"])["hash"])
    stake, unlock, staked_at, _ = operator
    weight = stake if stake >= min_stake and unlock == 0 else 0
    return is_drawn(block_hash, request_id, address, weight, staked_at, req["requestBlock"], req["totalStake"],
                    committee_size)
