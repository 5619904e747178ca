"""Issue 27's attacks on a real node (anvil), as an attacker would send them: the members' public
openings submitted with other bytes, by an outsider and by a colluding member; attackers that commit
first; an operator without a seat challenging a forged result and finalising its own. The embedded
chain versions, with every check, are tests/chain/test_chain_oracle_security.py."""

from __future__ import annotations

import os

import pytest
from chainkit import CONFIG, NO_TRACE, chain_past, tiny_model
from eth_account import Account
from test_chain_anvil import MNEMONIC, running_anvil
from test_chain_batched import WINDOW
from web3 import Web3
from web3.logs import DISCARD

import cvm
from cvm.chain import model_commitment
from cvm.chain.batch import deploy_batched_oracle, opening_tuple, round_from_receipt, sign_commit, signed_commit_tuple
from cvm.chain.contracts import TxFailed, contract_at, register_model, send
from cvm.chain.protocol import commitment
from cvm.chain.states import Status
from cvm.chain.store import ModelStore

pytestmark = [pytest.mark.chain, pytest.mark.anvil]


def keys(n: int):
    Account.enable_unaudited_hdwallet_features()
    return [Account.from_mnemonic(MNEMONIC, account_path=f"m/44'/60'/0'/0/{i}") for i in range(n)]


class Anvil:
    """A BatchedOracle on anvil with the tiny model and three staked operators."""

    def __init__(self, tmp_path, url, w3):
        ks = keys(7)
        self.w3, self.deployer, self.ops, self.outsider, self.player = w3, ks[0], ks[1:5], ks[5], ks[6]
        store = ModelStore(tmp_path / "models")
        self.model = store.get(store.put(tiny_model()))
        self.dep = deploy_batched_oracle(w3, self.deployer, CONFIG)
        register_model(self.dep.registry, self.deployer, self.model)
        model_commitment.publish(w3, self.dep.registry, self.deployer, self.model)  # no trace precompile here
        self.oracle = self.dep.oracle
        for k in self.ops[:3]:
            send(w3, k, self.oracle.functions.stake(), value=CONFIG.min_stake)

    def request(self, window: int):
        x = bytes([1, 2, 3, 4])
        y = self.model.run(self.model.decode_input(x), backend="reference")
        r = send(self.w3, self.player, self.oracle.functions.requestWithWindow(self.model.hash, x, self.player.address,
                                                                                window),
                 value=self.oracle.functions.feeFor(self.model.hash).call())
        self.w3.provider.make_request("evm_mine", [])  # the request's block sealed: the draw's seed
        return round_from_receipt(self.oracle, r), self.model.encode_output(y), cvm.output_hash(y)

    def commit_all(self, rnd, ops, output, out_hash, roots=None):
        salts = {op.address: os.urandom(32) for op in ops}
        signed = [sign_commit(op, self.w3.eth.chain_id, self.oracle.address, rnd.request_id,
                              commitment(rnd.request_id, out_hash, (roots or {}).get(op.address, NO_TRACE),
                                         salts[op.address], op.address, output)) for op in ops]
        r = send(self.w3, ops[0], self.oracle.functions.commitSigned(rnd.request_id, rnd.call,
                                                                      [signed_commit_tuple(s) for s in signed]))
        return round_from_receipt(self.oracle, r), salts


def reverted(error: str, fn):
    with pytest.raises(TxFailed) as e:
        fn()
    assert e.value.error == error, e.value


def test_outsiders_and_colluders_cannot_substitute_the_output_on_anvil(tmp_path):
    with running_anvil(tmp_path) as (url, w3):
        a = Anvil(tmp_path, url, w3)
        rnd, out, h = a.request(0)
        rnd, salts = a.commit_all(rnd, a.ops[:3], out, h)
        chain_past(w3, rnd.fields["commitDeadline"])
        openings = [opening_tuple(op.address, h, NO_TRACE, salts[op.address]) for op in a.ops[:2]]
        forged = bytes(len(out))
        reverted("NotSeated", lambda: send(w3, a.outsider, a.oracle.functions.reveal(rnd.request_id, rnd.call,
                                                                                     openings, forged)))
        reverted("CommitmentMismatch", lambda: send(w3, a.ops[2], a.oracle.functions.reveal(rnd.request_id, rnd.call,
                                                                                            openings, forged)))
        r = send(w3, a.ops[2], a.oracle.functions.reveal(rnd.request_id, rnd.call, openings, out),
                 gas=a.oracle.functions.revealGas(len(out)).call())
        assert bytes(a.oracle.events.Finalized().process_receipt(r, errors=DISCARD)[0]["args"]["output"]) == out


def test_an_operator_without_a_seat_wins_on_anvil(tmp_path):
    """Two attackers hold every seat and reveal a forged output with a window; an operator staked after
    the request challenges both; both miss their moves; its own output finalises."""
    with running_anvil(tmp_path) as (url, w3):
        a = Anvil(tmp_path, url, w3)
        rnd, out, h = a.request(WINDOW)
        attackers, honest = a.ops[:2], a.ops[3]
        send(w3, honest, a.oracle.functions.stake(), value=CONFIG.min_stake)
        forged = bytes(len(out))
        rnd, salts = a.commit_all(rnd, attackers, forged, h)
        chain_past(w3, rnd.fields["commitDeadline"])
        openings = [opening_tuple(op.address, h, NO_TRACE, salts[op.address]) for op in attackers]
        rnd = round_from_receipt(a.oracle, send(w3, attackers[0], a.oracle.functions.reveal(
            rnd.request_id, rnd.call, openings, forged)))
        children = (os.urandom(32), os.urandom(32))
        root = Web3.keccak(children[0] + children[1])
        mine, theirs = (h, Web3.keccak(out), root), (h, Web3.keccak(forged), NO_TRACE)
        game = contract_at(w3, "DisputeGame", a.oracle.functions.disputeGame().call())
        ids = []
        for attacker in attackers:
            r = send(w3, honest, a.oracle.functions.challenge(rnd.request_id, rnd.call, attacker.address, mine, theirs))
            ids += [e["args"]["disputeId"] for e in a.oracle.events.DisputeOpened().process_receipt(r, errors=DISCARD)]
        for i in ids:
            send(w3, honest, game.functions.bisect(i, *children))
        chain_past(w3, w3.eth.get_block("latest")["timestamp"] + CONFIG.dispute_move_time)
        for i in ids:
            send(w3, a.outsider, game.functions.timeout(i))
        chain_past(w3, rnd.fields["commitDeadline"] + CONFIG.reveal_window + WINDOW)
        reverted("NoUniqueResult", lambda: send(w3, a.outsider, a.oracle.functions.finalize(
            rnd.request_id, rnd.call, h, NO_TRACE, forged)))
        send(w3, a.outsider, a.oracle.functions.finalize(rnd.request_id, rnd.call, h, root, out),
             gas=a.oracle.functions.revealGas(len(out)).call())
        assert a.oracle.functions.statusOf(rnd.request_id).call() == Status.FINALIZED
        assert a.oracle.functions.claimable(honest.address).call() >= CONFIG.slash_amount
