"""The Solidity referee's gas per op, for docs/chain.md: over some models, the costliest node of each
op (by its CVM gas), at its element with the most reads (a sample of 64 elements through the tensor),
measured as `eth_estimateGas` of `Referee.evaluate` sent as a transaction.

    python -m cvm.chain.referee_gas --rpc http://127.0.0.1:8545 --key 0x... a.cvm b.cvm ...

prints the markdown table; tests/chain/test_chain_referee.py runs `measure` on the fixture models
(`pytest -s -k gas`). Models with several inputs are measured too (node_spec does not need the one
input that `model_commitment.commit` does): each node's element is judged the same way.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import cvm
from cvm.chain import referee_commitment as mc
from cvm.chain import referee
from cvm.chain.trace import Trace, run_trace
from cvm.values import storage_dtype

SAMPLED = 64  # elements looked at per node to find the one with the most reads


@dataclass(frozen=True)
class Row:
    op: str
    model: str
    node: int
    shape: tuple[int, ...]
    reads: int
    words: int
    gas: int


def largest_nodes(models: dict[str, cvm.Model]) -> list[tuple[str, str, cvm.Model, int]]:
    """(op, model name, model, trace leaf) of the costliest node of each op over the models."""
    best: dict[str, tuple] = {}
    for name, model in models.items():
        first = len(model.graph.inputs)
        for k, node in enumerate(model.graph.nodes):
            cost = int(model.analysis.node_costs[k])
            if node.op not in best or cost > best[node.op][0]:
                best[node.op] = (cost, name, model, k + first)
    return [(op, name, model, index) for op, (_, name, model, index) in sorted(best.items())]


def sample_input(model: cvm.Model, seed: int = 0):
    """A random sample within each input's bits (an array, or a dict by name for several inputs)."""
    rng = np.random.default_rng(seed)
    xs = {}
    for spec, inp in zip(model.inputs, model.graph.inputs):
        lim = 2 ** (inp.bits - 1) - 1
        xs[spec.name] = rng.integers(-lim, lim + 1, (1, *spec.shape[1:])).astype(storage_dtype(inp.bits))
    return next(iter(xs.values())) if len(xs) == 1 else xs


def costliest_element(spec: mc.NodeSpec) -> int:
    """The element with the most reads among SAMPLED spread through the output (an interior one for windows)."""
    return max(range(0, spec.out_numel, max(1, spec.out_numel // SAMPLED)),
               key=lambda k: sum(map(len, referee.needed(spec, k))))


def measure_node(contract, account, t: Trace, index: int) -> tuple[int, int, int]:
    """(elements read, words given, gas) of Referee.evaluate at the node's costliest element; the
    value is checked against the trace."""
    spec = mc.node_spec(t.model, index)
    e = costliest_element(spec)
    ops, _ = referee.element_args(t, spec, index, e)
    fn = contract.functions.evaluate(spec.as_tuple(), e, ops)
    value, want = fn.call()[0], int(t.tensors[index].reshape(-1)[e])
    if value != want:
        raise AssertionError(f"leaf {index}: the referee gives {value}, the trace {want}")
    reads = sum(map(len, referee.element_reads(t, spec, e)))
    return reads, sum(len(o[0]) for o in ops), fn.estimate_gas({"from": account.address})


def measure(contract, account, models: dict[str, cvm.Model], inputs: dict | None = None) -> list[Row]:
    """A row per op: its costliest node over `models` (each run on inputs[name] or a random sample)."""
    traces: dict[str, Trace] = {}
    rows = []
    for op, name, model, index in largest_nodes(models):
        if name not in traces:
            traces[name] = run_trace(model, (inputs or {}).get(name, sample_input(model)))
        reads, words, gas = measure_node(contract, account, traces[name], index)
        node = index - len(model.graph.inputs)
        rows.append(Row(op, name, node, tuple(model.analysis.tensors[model.graph.nodes[node].output].shape),
                        reads, words, gas))
    return rows


def table(rows: list[Row]) -> str:
    lines = ["| op | model, node | output shape | elements read | words given | gas (evaluate tx) |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r.op} | {r.model}, node {r.node} | {list(r.shape)} | {r.reads} | {r.words} | {r.gas:,} |"
              for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from eth_account import Account
    from web3 import Web3

    from cvm.chain.contracts import deploy

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rpc", required=True, help="a chain's JSON-RPC URL (anvil)")
    ap.add_argument("--key", required=True, help="the private key that deploys the Referee")
    ap.add_argument("models", nargs="+", type=Path, help=".cvm files")
    args = ap.parse_args(argv)
    w3 = Web3(Web3.HTTPProvider(args.rpc))
    account = Account.from_key(args.key)
    contract, _ = deploy(w3, account, "Referee")
    print(table(measure(contract, account, {p.stem: cvm.load(p) for p in args.models})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
