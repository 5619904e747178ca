"""The honest side's worst-case gas in a dispute about a model: what a request's bond must cover so
that proving a forged result wrong never costs the one honest operator more than it wins.

A dispute (contracts/src/DisputeGame.sol) costs the honest side, at most: opening it, one `bisect`
a trace level, then settling the first differing leaf. An input leaf is settled by `resolveStep`
from the request's input, the output by `resolveOutput`; a node's leaf by the trace precompile
(`resolveStep`, the node's CVM gas) where the chain has one, else by the referee: `openNode`, one
`bisectWords` a round down the node's output words (referee_commitment.word_rounds), and
`resolveElement`, bounded by the referee's gas budget for one element of that node
(REFEREE_BASE_GAS + max_reads * read_gas, which bounds `Referee.evaluate` sent as a transaction,
tests/chain/test_chain_referee.py) plus the spec, the activations' trace proofs and the slashing.
The forger picks the leaf; `worst_case` is the maximum over every leaf of both ways of settling a
node. The move costs are measured on anvil (prague) and rounded up: tests/chain/
test_chain_dispute_cost.py plays a forged resnet_cifar conv dispute and checks the honest side's
gas stays under this bound.

    python -m cvm.chain.dispute_cost fixtures/models/*.cvm ...     prints the table of docs/chain.md
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from eth_abi import encode

import cvm
from cvm.chain import referee_commitment as mc
from cvm.chain import trace
from cvm.chain.referee_ops import REFEREE_OPS
from cvm.gas import call_base_gas
from cvm.ops import SCHEDULES
from cvm.values import storage_dtype

TX_GAS = 21_000  # every transaction's intrinsic gas
CALLDATA_GAS = 16  # per calldata byte (EIP-2028; zero bytes cost 4: an upper bound)
PROOF_NODE_GAS = 32 * CALLDATA_GAS + 200  # one Merkle proof node: its calldata and one keccak256 step
# measured on anvil (prague), each move's gas beyond the transaction's and its calldata's, rounded up
# (tests/chain/test_chain_dispute_cost.py prints them: a resnet_cifar conv dispute, the honest side's
# moves: openDispute 416,443 in all; bisect 94,929 the first, about 61,000 after; bisectWords 90,079
# in all with 2,048 bytes of calldata; resolveElement 1,174,228)
OPEN_DISPUTE_GAS = 550_000  # InferenceOracle.openDispute with DisputeGame.start, in all
BISECT_GAS = 80_000  # one bisect (the first writes both parties' slots from zero)
OPEN_NODE_GAS = 60_000  # openNode: the spec's hash and proof, the word tree's depth, the phase
BISECT_WORDS_GAS = 50_000  # one bisectWords round, the second mover's: the fold, the log, the descent
RESOLVE_GAS = 150_000  # resolveElement beyond Referee.evaluate: the spec check, the element, slashing two parties
STEP_GAS = 150_000  # resolveStep / resolveOutput beyond their data and the precompile: proofs, slashing


@dataclass(frozen=True)
class Cost:
    gas: int  # the honest side's total
    leaf: int  # the trace leaf it is settled at
    what: str  # "input", "output", "node 3 (conv2d)" ...
    path: str  # "referee", "precompile", "input", "output"


def _bytes(model: cvm.Model, name: str) -> int:
    info = model.analysis.tensors[name]
    return int(np.prod(info.shape, dtype=np.int64)) * np.dtype(storage_dtype(info.bits)).itemsize


def bisection_gas(model: cvm.Model) -> int:
    """Opening the dispute and one bisect per trace level."""
    return OPEN_DISPUTE_GAS + trace.depth_for(len(trace.tensor_names(model))) * (TX_GAS + 64 * CALLDATA_GAS + BISECT_GAS)


def referee_gas(model: cvm.Model, c: mc.Commitment, leaf: int) -> int:
    """openNode, the word rounds and resolveElement at `leaf` (a node's), by the referee."""
    spec = c.specs[leaf]
    depth = trace.depth_for(c.leaf_count)
    spec_bytes = len(encode([mc.SPEC_TYPE], [spec.as_tuple()]))
    ref = REFEREE_OPS[model.graph.nodes[leaf - len(model.graph.inputs)].op]
    evaluate = mc.REFEREE_BASE_GAS + ref.max_reads(spec.params, len(spec.act)) * ref.read_gas
    words = trace.depth_for(max(1, -(-spec.out_numel * spec.out_size // trace.WORD)))
    open_node = TX_GAS + spec_bytes * CALLDATA_GAS + depth * PROOF_NODE_GAS + OPEN_NODE_GAS
    rounds = mc.word_rounds(words) * (TX_GAS + 64 * 32 * CALLDATA_GAS + BISECT_WORDS_GAS)
    resolve = evaluate + spec_bytes * CALLDATA_GAS + len(spec.act) * depth * PROOF_NODE_GAS + RESOLVE_GAS
    return open_node + rounds + resolve


def precompile_gas(model: cvm.Model, leaf: int) -> int:
    """resolveStep at a node's leaf where the trace precompile re-executes it."""
    names, depth = trace.tensor_names(model), trace.depth_for(len(trace.tensor_names(model)))
    producers = trace.node_inputs(model, leaf)
    data = 1 + 32 + 4 + sum(_bytes(model, names[p]) for p in producers)
    schedule = SCHEDULES[model.graph.opset]
    return (TX_GAS + data * CALLDATA_GAS + call_base_gas(model) + schedule.io_gas(data) + trace.step_gas(model, leaf)
            + len(producers) * depth * PROOF_NODE_GAS + STEP_GAS)


def ends(model: cvm.Model) -> list[Cost]:
    """Settling at an input leaf (the request's whole input in calldata) or at the output."""
    depth = trace.depth_for(len(trace.tensor_names(model)))
    request = sum(_bytes(model, i.name) for i in model.graph.inputs)
    out = _bytes(model, model.graph.outputs[0])
    schedule = SCHEDULES[model.graph.opset]
    return [Cost(TX_GAS + request * (CALLDATA_GAS + 6) + STEP_GAS, 0, "input", "input"),
            Cost(TX_GAS + out * CALLDATA_GAS + call_base_gas(model) + schedule.io_gas(out) + depth * PROOF_NODE_GAS
                 + STEP_GAS, trace.output_leaf(model), "output", "output")]


def settle_costs(model: cvm.Model, commitment: mc.Commitment | None = None) -> list[Cost]:
    """What settling each leaf costs the honest side after the bisection, both ways for a node;
    referee costs only with a commitment (the model's, `mc.commit`, by default when it has one)."""
    if commitment is None:
        try:
            commitment = mc.commit(model)
        except mc.NotRefereed:
            pass
    costs = ends(model)
    first = len(model.graph.inputs)
    for k, node in enumerate(model.graph.nodes):
        what = f"node {k} ({node.op})"
        costs.append(Cost(precompile_gas(model, first + k), first + k, what, "precompile"))
        if commitment is not None:
            costs.append(Cost(referee_gas(model, commitment, first + k), first + k, what, "referee"))
    return costs


def worst_case(model: cvm.Model, commitment: mc.Commitment | None = None, path: str | None = None) -> Cost:
    """The honest side's worst-case dispute gas: the bisection and the costliest leaf to settle
    (of one `path`, "referee" or "precompile", with the input and output leaves, when given)."""
    costs = [c for c in settle_costs(model, commitment) if path is None or c.path in (path, "input", "output")]
    top = max(costs, key=lambda c: c.gas)
    return Cost(bisection_gas(model) + top.gas, top.leaf, top.what, top.path)


def dispute_gas(model: cvm.Model, commitment: mc.Commitment) -> int:
    """What the registry stores with a referee commitment (ModelRegistry.disputeGas): the worst
    case over both ways of settling a node, so it holds on a chain with the trace precompile too."""
    return worst_case(model, commitment).gas


def table(models: dict[str, cvm.Model]) -> str:
    lines = ["| model | trace leaves | worst case, referee (node) | worst case, precompile (node) | disputeGas |",
             "|---|---|---|---|---|"]
    for name, model in models.items():
        leaves = len(trace.tensor_names(model))
        try:
            c = mc.commit(model)
        except mc.NotRefereed as e:
            p = worst_case(model, path="precompile")
            lines.append(f"| {name} | {leaves} | NotRefereed: {e} | {p.gas:,} ({p.what}) | none |")
            continue
        r, p = worst_case(model, c, "referee"), worst_case(model, c, "precompile")
        lines.append(f"| {name} | {leaves} | {r.gas:,} ({r.what}) | {p.gas:,} ({p.what}) | {max(r.gas, p.gas):,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path, help=".cvm files")
    args = ap.parse_args(argv)
    print(table({p.stem: cvm.load(p) for p in args.models}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
