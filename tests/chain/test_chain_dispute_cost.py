"""The dispute gas a listing stores (cvm/chain/dispute_cost.py) covers what an honest operator really
spends. On anvil (no trace precompile: the Solidity referee judges), the resnet_cifar listing of a
publisher who is not the file's first registrant: two colluders reveal a trace forged at a conv
output, the honest operator opens the dispute and plays its moves (bisections, openNode,
the word rounds, resolveElement; openNode whoever comes first); its gas, per move, stays under the model's worst case and under
the bound for that very node. `pytest -s` prints the moves' gas (the calibration of dispute_cost).
"""

from __future__ import annotations

import pytest
from chainkit import CONFIG, TEST_ARTIFACTS
from test_chain_referee import _anvil_env
from test_chain_referee_ops import STAKE, Game, play
from test_chain_referee_words import CONV_LEAF, anvil_chain, resnet, x_of  # noqa: F401 (fixtures)

from cvm.chain import dispute_cost
from cvm.chain import model_commitment as mc
from cvm.chain.contracts import deploy, deploy_oracle, register_listing, register_model, send

pytestmark = [pytest.mark.chain, pytest.mark.anvil]


@pytest.fixture(scope="module")
def listed_game(anvil_chain, resnet):  # noqa: F811
    w3, keys = _anvil_env(anvil_chain)
    deployer, liar_a, liar_b, honest, player, squatter = keys[:6]
    dep = deploy_oracle(w3, deployer, CONFIG)
    register_model(dep.registry, squatter, resnet)  # the squatter holds the listing whose id is the hash
    send(w3, squatter, dep.registry.functions.commitReferee(resnet.hash, (b"\x01" * 32, 2, 1, b""), 1))
    listing, _ = register_listing(dep.registry, deployer, resnet)
    mc.publish(w3, dep.registry, deployer, resnet, listing=listing)
    for op in (liar_a, liar_b, honest):
        send(w3, op, dep.oracle.functions.stake(), value=STAKE)
    consumer, _ = deploy(w3, deployer, "TestConsumer", dep.oracle.address, 0, directory=TEST_ARTIFACTS)
    return Game(w3, dep, consumer, deployer, (liar_a, liar_b), honest, player), listing


def honest_moves(w3, game: Game, since: int) -> list[tuple[str, int]]:
    """(function, gas used) of each dispute move the honest operator sent after block `since`, and
    openNode whoever sent it."""
    contracts = [game.dep.oracle, game.dep.oracle.w3.eth.contract(
        address=game.dep.oracle.functions.disputeGame().call(), abi=_game_abi())]
    moves = []
    for n in range(since + 1, w3.eth.block_number + 1):
        for tx in w3.eth.get_block(n, full_transactions=True)["transactions"]:
            for c in contracts:
                try:
                    fn, _ = c.decode_function_input(tx["input"])
                except ValueError:
                    continue
                # openNode: whoever comes first (the colluder here); the honest side may have to
                if fn.fn_name == "openNode" or (tx["from"] == game.honest.address and
                                                fn.fn_name not in ("commit", "reveal")):
                    moves.append((fn.fn_name, w3.eth.get_transaction_receipt(tx["hash"])["gasUsed"]))
                break
    return moves


def _game_abi():
    from cvm.chain.contracts import load_artifact
    return load_artifact("DisputeGame")["abi"]


def test_the_honest_sides_dispute_gas_stays_under_the_listings(listed_game, resnet, salts):  # noqa: F811
    game, listing = listed_game
    w3, registry = game.w3, game.dep.registry
    mc.require_served(w3, registry, resnet, listing)
    with pytest.raises(mc.RefereeMismatch):  # the squatter's listing: a garbage root
        mc.require_served(w3, registry, resnet)
    since = w3.eth.block_number
    d, moves, resolved = play(game, resnet, x_of(resnet, 3), CONV_LEAF, salts, model_id=listing)
    assert d["referee"] and d["index"] == CONV_LEAF and d["modelHash"] == listing, moves
    assert (resolved["challengerWrong"], resolved["defenderWrong"]) == (False, True), resolved
    spent = honest_moves(w3, game, since)
    total = sum(g for _, g in spent)
    c = mc.commit(resnet)
    bound = dispute_cost.bisection_gas(resnet) + dispute_cost.referee_gas(resnet, c, CONV_LEAF)
    print(f"\nresnet_cifar listing, conv2d at leaf {CONV_LEAF}: the honest side's moves {spent}; total {total:,}; "
          f"bound for this node {bound:,}; the listing's dispute gas {registry.functions.disputeGas(listing).call():,}")
    assert {"openDispute", "openNode", "resolveElement"} <= {f for f, _ in spent}, spent
    assert total <= bound <= registry.functions.disputeGas(listing).call()
    for fn, gas in spent:  # each kind of move under its own bound
        limit = {"openDispute": dispute_cost.OPEN_DISPUTE_GAS,
                 "bisect": dispute_cost.TX_GAS + 64 * dispute_cost.CALLDATA_GAS + dispute_cost.BISECT_GAS,
                 "bisectWords": dispute_cost.TX_GAS + 2048 * dispute_cost.CALLDATA_GAS + dispute_cost.BISECT_WORDS_GAS}
        assert gas <= limit.get(fn, bound), (fn, gas)
