"""A listing's referee commitment on chain: the publisher sets it with its dispute gas (`publish`), an
operator checks it before serving a request on the listing (`require_served`, `check_published`).

The commitment itself is cvm/chain/referee_commitment.py, and its worst-case dispute gas
cvm/chain/dispute_cost.py (which reads the commitment: this module sits above both). Its names are
importable from here too (model_commitment.commit, .NodeSpec, ...), as before the split.
"""

from __future__ import annotations

import cvm
from cvm.chain.dispute_cost import dispute_gas
from cvm.chain.referee_commitment import (ACTIVATION_NONE, MAX_DEPTH, MAX_REFEREE_GAS, MAX_REFEREE_INPUTS, OPS,
                                          REFEREE_BASE_GAS, SPEC_TYPE, WORD_LEVELS, Commitment, NodeSpec,
                                          NotRefereed, RefereeMismatch, commit, node_spec, output_prefix, word_rounds)

__all__ = ["ACTIVATION_NONE", "MAX_DEPTH", "MAX_REFEREE_GAS", "MAX_REFEREE_INPUTS", "OPS", "REFEREE_BASE_GAS",
           "SPEC_TYPE", "WORD_LEVELS", "Commitment", "NodeSpec", "NotRefereed", "RefereeMismatch", "check_published",
           "commit", "has_trace_precompile", "node_spec", "output_prefix", "publish", "require_served", "word_rounds"]


def publish(w3, registry, author, model: cvm.Model, listing: bytes | None = None, replace: bool = False, **kw):
    """The publisher's ModelRegistry.commitReferee for a listing of `model` (its author's, id = the
    model hash, by default), with the worst-case dispute gas; `replace`: proposeReferee instead, a
    replacement in force after ModelRegistry.REFEREE_DELAY (applyReferee)."""
    from cvm.chain.contracts import send
    c = commit(model)
    fn = registry.functions.proposeReferee if replace else registry.functions.commitReferee
    return send(w3, author, fn(model.hash if listing is None else listing, c.as_tuple(), dispute_gas(model, c)), **kw)


def _mine(model: cvm.Model) -> tuple[tuple, int] | str:
    """(commitment tuple, dispute gas) of the model, or why the referee cannot judge it; cached."""
    key = bytes(model.hash)
    if key not in _MINE:
        try:
            c = commit(model)
            _MINE[key] = (c.as_tuple(), dispute_gas(model, c))
        except NotRefereed as e:
            _MINE[key] = str(e)
    return _MINE[key]


def check_published(registry, model: cvm.Model, listing: bytes | None = None) -> bool:
    """Whether the listing (the author's by default) holds this model's commitment as recomputed here
    (an operator's check: a wrong commitment would make the referee judge honest operators wrong).
    False for a model the referee cannot judge."""
    mine = _mine(model)
    listing = model.hash if listing is None else listing
    return not isinstance(mine, str) and tuple(registry.functions.refereeCommitment(listing).call()) == mine[0]


def has_trace_precompile(w3, model_hash: bytes) -> bool:
    """Whether this chain's trace precompile knows the model (DisputeGame._traceInfo's test): there
    the precompile re-executes a disputed node and the referee commitment plays no part."""
    from cvm.chain.trace_precompile import CVM_TRACE_ADDRESS
    try:
        ret = w3.eth.call({"to": w3.to_checksum_address(CVM_TRACE_ADDRESS), "data": b"\x00" + bytes(model_hash)})
    except Exception:  # a reverting or absent precompile: eth_call raises on some nodes
        return False
    return len(ret) == 64


_MINE: dict[bytes, tuple[tuple, int] | str] = {}  # model hash -> its commitment and dispute gas (a pure function)


def require_served(w3, registry, model: cvm.Model, listing: bytes | None = None) -> None:
    """An operator's check before it serves a request on `listing` (a ModelRegistry listing id; the
    author's, the model hash, by default). On every chain the listing must list this model's file
    (`modelHashOf`) with the model's input and output specs (DisputeGame takes each input leaf's slice
    of the request by them). On a chain without the trace precompile it must hold exactly this model's
    referee commitment (none: no dispute can start, so a colluding majority goes unchallenged; a wrong
    one: the referee judges honest operators wrong) with a dispute gas at least the model's worst case
    (`dispute_cost.dispute_gas`: the bonds it prices must cover an honest dispute), and a replacement
    proposed for them (`proposeReferee`) must be right too, since it comes into force while requests
    taken now may still be disputed. Raises RefereeMismatch with a one-line reason. A few calls, the
    commitment computed once per model: the node calls this for every request."""
    from cvm.chain.contracts import call_struct, tensor_spec
    listing = bytes(model.hash if listing is None else listing)
    short = listing.hex()[:12]
    if bytes(registry.functions.modelHashOf(listing).call()) != bytes(model.hash):
        raise RefereeMismatch(f"listing {short} does not list model {model.hash.hex()[:12]}")
    m = call_struct(registry.functions.getModel(listing))
    extra = registry.functions.extraInputs(listing).call()
    registered = [tuple(m["input"])] + [tuple(s) for s in extra] + [tuple(m["output"])]
    if [(list(shape), bits) for shape, bits in registered] != [tensor_spec(s) for s in (*model.inputs, *model.outputs)]:
        raise RefereeMismatch(f"listing {short}: the registry's input specs are not the model's inputs or its output "
                              f"spec not its output, so a dispute would cut the request's input into the wrong leaves")
    if has_trace_precompile(w3, model.hash):
        return
    mine = _mine(model)
    if isinstance(mine, str):
        raise RefereeMismatch(f"model {short} cannot be refereed on this chain (no trace precompile): {mine}")
    on_chain = tuple(registry.functions.refereeCommitment(listing).call())
    if on_chain[0] == bytes(32):
        raise RefereeMismatch(f"listing {short} has no referee commitment in the registry (its publisher's "
                              f"commitReferee): a dispute about it could not start on this chain")
    if on_chain != mine[0]:
        raise RefereeMismatch(f"listing {short}: the registry's referee commitment (root "
                              f"{bytes(on_chain[0]).hex()[:12]}) is not the model's (root {mine[0][0].hex()[:12]})")
    if registry.functions.disputeGas(listing).call() < mine[1]:
        raise RefereeMismatch(f"listing {short}: its dispute gas {registry.functions.disputeGas(listing).call():,} is "
                              f"below the model's worst case {mine[1]:,}, so bonds would not cover an honest dispute")
    pending, pending_gas, effective_at = registry.functions.pendingReferee(listing).call()
    if effective_at and (tuple(pending) != mine[0] or pending_gas < mine[1]):
        raise RefereeMismatch(f"listing {short}: a wrong referee commitment (root {bytes(pending[0]).hex()[:12]}) or "
                              f"dispute gas is proposed to replace the right one at {effective_at}: not served")
