"""The batched round of `cvm demo` (cvm/chain/demo.py) on the embedded chain: BatchedOracle, DigitGame,
a relay (cvm/chain/relay.py, in process) and three cvm/chain/batch_node.py operators, on the same
committed digit model and test image. Prints the gas of each transaction of the round and checks the
result, like the demo.

    .venv/bin/python -m cvm.chain.batch_demo [--index N] [--backend numba]
    .venv/bin/python -m cvm.chain.gasprofile --batched       (the same, with the opcode tallies)

The round is the request, the committee's signed commits in one transaction, and the quorum's
openings in one transaction, which finalises and calls DigitGame back; the third member's opening
follows in its own transaction (bond back, no fee).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from web3.logs import DISCARD

from cvm.chain import demo, relay
from cvm.chain.batch import deploy_batched_oracle, latest_round
from cvm.chain.batch_node import BatchedOperator
from cvm.chain.contracts import deploy, register_model, send
from cvm.chain.embedded import EmbeddedChain
from cvm.chain.states import DONE, Status
from cvm.chain.store import ModelStore

MAX_PASSES = 10  # operator passes before the demo gives up


def run_batched_demo(index: int = 0, backend: str = "numba") -> int:
    model_file, data_file = demo.find_model(None, None)
    workdir = Path(tempfile.mkdtemp(prefix="cvm-batch-demo-"))
    store = ModelStore(workdir / "models")
    model = store.get(store.put(model_file))
    x, label = demo.load_sample(model, data_file, index)
    image, expected = model.encode_input(x), model.run(x, backend=backend)
    expected_class = int(np.argmax(expected[0]))

    chain = EmbeddedChain(store, backend=backend)
    w3, (deployer, *accounts) = chain.w3, chain.keys
    config = demo.DEMO_CONFIG
    dep = deploy_batched_oracle(w3, deployer, config)
    gas = [["deploy BatchedOracle", dep.receipts["BatchedOracle"]["gasUsed"],
            f"k={config.quorum} of n={config.committee_size}, with its DisputeGame"]]
    register_model(dep.registry, deployer, model, uri=f"file:{model_file.name}")
    oracle = dep.oracle
    game, _ = deploy(w3, deployer, "DigitGame", oracle.address, model.hash, demo.PRIZE, 0, value=100 * demo.PRIZE)
    keys, player = accounts[:demo.NUM_OPERATORS], accounts[demo.NUM_OPERATORS]
    for key in keys:
        send(w3, key, oracle.functions.stake(), value=config.min_stake)
    chain.mine()  # stakes older than the request: every operator may be drawn

    server = relay.serve(w3, [oracle.address], port=0)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        operators = [BatchedOperator(w3, key, oracle.address, store, workdir / f"node{i + 1}.sqlite",
                                     backend=backend, relay=url) for i, key in enumerate(keys)]
        fee = oracle.functions.feeFor(model.hash).call()
        request = send(w3, player, game.functions.play(image, label), value=fee)
        rid = game.events.GameStarted().process_receipt(request, errors=DISCARD)[0]["args"]["requestId"]
        chain.mine()  # the request's block sealed: the draw's seed is known
        for i in range(MAX_PASSES):
            for op in operators:
                op.step()
            if all(op.job(rid) is not None and op.job(rid).state == DONE for op in operators):
                break
            if i == 0:  # signed and aggregated: the commit window passes (seats are drawn until its end)
                chain.advance_time(config.commit_window + 1)
    finally:
        server.shutdown()

    gas += round_rows(w3, oracle, rid, request)
    final = latest_round(oracle, rid)
    played = game.events.GamePlayed().get_logs(from_block=0)
    predicted = played[0]["args"]["predicted"] if played else None
    round_gas = sum(row[1] for row in gas if row[2].startswith("round"))
    checks = [
        demo.Check("oracle finalised", final.status == Status.FINALIZED, final.status.name.lower()),
        demo.Check("callback scored", predicted == expected_class, f"predicted {predicted}, label {label}"),
        demo.Check("every member revealed", all(final.revealed(i) for i in range(len(final.committers))),
                   f"{len(final.committers)} committers"),
        demo.Check("round in three transactions", sum(row[2].startswith("round") for row in gas) == 3,
                   f"{round_gas:,} gas"),
    ]
    return demo.report(gas, checks)


def round_rows(w3, oracle, rid: int, request: dict) -> list[list]:
    """The request and every transaction that changed its round, in chain order."""
    hashes = {e["transactionHash"] for e in oracle.events.RoundUpdated().get_logs(
        from_block=request["blockNumber"], argument_filters={"requestId": rid})} - {request["transactionHash"]}
    receipts = sorted((w3.eth.get_transaction_receipt(h) for h in hashes),
                      key=lambda r: (r["blockNumber"], r["transactionIndex"]))
    rows, final = [["request (DigitGame.play)", request["gasUsed"], "round: fee paid"]], False
    for r in receipts:
        name = oracle.get_function_by_selector(w3.eth.get_transaction(r["transactionHash"])["input"][:4]).fn_name
        finalising = bool(oracle.events.Finalized().process_receipt(r, errors=DISCARD))
        note = ("round: finalise + callback" if finalising else "after finalisation" if final
                else "round")
        final = final or finalising
        rows.append([name, r["gasUsed"], note])
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.chain.batch_demo", description=__doc__.splitlines()[0])
    p.add_argument("--index", type=int, default=0, help="the test image")
    p.add_argument("--backend", default="numba")
    args = p.parse_args(argv)
    return run_batched_demo(index=args.index, backend=args.backend)


if __name__ == "__main__":
    sys.exit(main())
