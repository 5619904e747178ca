"""Issue 27, attack 3: the relay held no key and checked no one. Anyone could overwrite a member's
opening, and junk commits or openings signed by throwaway keys filled a request's 16 slots, locking
the real members out. Now every message is signed by the operator it names and checked against the
chain (cvm/chain/relay_gate.py) before the board keeps it."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import pytest
from eth_account import Account
from test_chain_batched import Round_, batched_env

from cvm.chain import relay
from cvm.chain.batch import sign_commit, sign_opening
from cvm.chain.relay_gate import Gate, Refused

pytestmark = pytest.mark.chain


@pytest.fixture
def env(tmp_path):
    return batched_env(tmp_path)


@pytest.fixture
def board(env):
    return relay.Board(Gate(env.w3, [env.oracle.address]))


def commit_msg(env, rnd, op, signer=None):
    signed = sign_commit(signer or op, env.w3.eth.chain_id, env.oracle.address, rnd.rid, rnd.commitment(op))
    return {**signed, "operator": op.address, "oracle": env.oracle.address, "chainId": env.w3.eth.chain_id,
            "requestId": rnd.rid}


def open_msg(env, rnd, op, signer=None, output=None):
    msg = sign_opening(signer or op, env.w3.eth.chain_id, env.oracle.address, rnd.rid, rnd.output_hash,
                       rnd.output if output is None else output, bytes(32), rnd.salts[op.address])
    return {**msg, "operator": op.address}


def test_only_drawn_operators_post_commits(env, board):
    ops = env.operators[:3]
    rnd = Round_(env)
    for _ in range(20):  # throwaway keys: no stake, not drawn
        stranger = Account.create()
        rnd.salts[stranger.address] = os.urandom(32)
        with pytest.raises(Refused, match="not drawn"):
            board.post("commits", commit_msg(env, rnd, stranger))
    with pytest.raises(Refused, match="signature"):  # under a member's name, signed by another key
        board.post("commits", commit_msg(env, rnd, ops[0], signer=Account.create()))
    for op in ops:
        board.post("commits", commit_msg(env, rnd, op))
    assert sorted(c["operator"] for c in board.get(env.oracle.address, rnd.rid)["commits"]) == \
        sorted(op.address for op in ops)


def test_only_a_seated_member_posts_its_own_opening(env, board):
    ops, outsider = env.operators[:3], env.chain.keys[7]
    rnd = Round_(env)
    rnd.commit_signed(ops[0], [rnd.signed(op) for op in ops[:2]])
    rnd.open_reveals()
    with pytest.raises(Refused, match="signature"):  # someone else's key cannot overwrite ops[0]'s opening
        board.post("openings", open_msg(env, rnd, ops[0], signer=outsider))
    with pytest.raises(Refused, match="no unrevealed seat"):  # drawn, but never committed
        board.post("openings", open_msg(env, rnd, ops[2]))
    with pytest.raises(Refused, match="does not open"):  # its own key, other bytes than it committed
        board.post("openings", open_msg(env, rnd, ops[0], output=bytes(len(rnd.output))))
    board.post("openings", open_msg(env, rnd, ops[0]))
    board.post("openings", open_msg(env, rnd, ops[1]))
    posted = board.get(env.oracle.address, rnd.rid)["openings"]
    assert [o["operator"] for o in posted] == [ops[0].address, ops[1].address]
    assert all(o["output"] == "0x" + rnd.output.hex() for o in posted)


def test_unknown_oracles_requests_and_chains_are_refused(env, board):
    rnd = Round_(env)
    op = env.operators[0]
    with pytest.raises(Refused, match="does not serve"):
        board.post("commits", {**commit_msg(env, rnd, op), "oracle": "0x" + "11" * 20})
    unknown = sign_commit(op, env.w3.eth.chain_id, env.oracle.address, 999, rnd.commitment(op))
    with pytest.raises(Refused, match="unknown"):
        board.post("commits", {**commit_msg(env, rnd, op), **unknown, "requestId": 999})
    with pytest.raises(Refused, match="chain"):
        board.post("commits", {**commit_msg(env, rnd, op), "chainId": 1})


def test_one_key_occupies_a_bounded_number_of_requests(env, board, monkeypatch):
    monkeypatch.setattr(relay, "MAX_PER_KEY", 2)
    op = env.operators[0]
    rounds = [Round_(env) for _ in range(3)]
    for rnd in rounds[:2]:
        board.post("commits", commit_msg(env, rnd, op))
    with pytest.raises(Refused, match="already has messages on 2 requests"):
        board.post("commits", commit_msg(env, rounds[2], op))
    board.post("commits", commit_msg(env, rounds[0], op))  # its own entry again: replaced, not counted twice


def test_the_http_relay_answers_a_refusal_with_400(env):
    server = relay.serve(env.w3, [env.oracle.address], port=0)
    try:
        rnd = Round_(env)
        url = f"http://127.0.0.1:{server.server_address[1]}/commit"
        body = json.dumps(commit_msg(env, rnd, env.operators[0], signer=Account.create())).encode()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}))
        assert e.value.code == 400 and "signature" in json.loads(e.value.read())["error"]
    finally:
        server.shutdown()
