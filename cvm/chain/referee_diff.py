"""Differential test of the Solidity referee (contracts/src/Referee.sol) against the reference
interpreter: random instances of every op the referee supports, in every opset that has the op,
each run by the reference interpreter on its one-node graph (a clip in front where an index or a
divisor must be proven in range) and by the referee on the embedded chain, element by element.

    python -m cvm.chain.referee_diff --cases 500 --seed 27     # CI's instances (per op); prints the figures
    python -m cvm.chain.referee_diff --cases 5000 --seed 1     # the documented long run

An instance is built from (seed, op, case) alone (cvm/chain/referee_cases.py), so a difference
printed here is replayed with `--ops OP --first CASE --cases 1`. The referee runs through
contracts/test/RefereeHarness.sol: Referee._compute for many instances per eth_call, each with the
words `referee.needed` says its elements read (a word it did not name reverts with MissingWord, so
the Python side of the dispute game is checked too). docs/chain.md ("Differential test of the
referee") gives the CI run and the long run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import cvm
from cvm.builder import GraphBuilder
from cvm.chain import referee_commitment as mc
from cvm.chain import referee, trace
from cvm.chain.referee_cases import DRAWS
from cvm.chain.referee_draw import Draw
from cvm.chain.referee_ops import REFEREE_OPS
from cvm.interp import reference
from cvm.ops import OPSETS
from cvm.values import storage_dtype

ELEMENTS = 1  # random elements checked per instance (and the first or the last, often): instances are what count
MAX_TRIES = 100  # draws of one instance before giving up (each refused by the verifier)


@dataclass
class Instance:
    op: str
    case: int
    label: str  # opset, shapes and attributes, for a report
    spec: mc.NodeSpec
    operands: list[tuple[list[int], list[bytes], list[bytes]]]
    elements: list[int]
    expected: list[int]
    data: list[bytes]  # each input's wire bytes (one sample), for evaluate_args


def element_values(data: bytes, size: int) -> np.ndarray:
    """A tensor's elements from its wire bytes (little-endian, `size` bytes each)."""
    return np.frombuffer(data, f"<i{size}")


def reads(spec: mc.NodeSpec, data: list[bytes], elements) -> list[list[int]]:
    """Per input position, the elements `referee.needed` says the referee reads for these elements."""
    flat = [element_values(d, size) for d, size in zip(data, spec.size)]
    out = [set() for _ in data]
    for e in elements:
        for pos, ks in enumerate(referee.needed(spec, e, lambda p, k: int(flat[p][k]))):
            out[pos].update(ks)
    return [sorted(ks) for ks in out]


def evaluate_args(inst: Instance, e: int) -> list:
    """Referee.evaluate's operands for element e of the instance: the words `referee.needed` names,
    with their multiproofs (what DisputeGame.resolveElement passes on)."""
    ks = reads(inst.spec, inst.data, [e])
    return [referee.operand(d, size, k) for d, size, k in zip(inst.data, inst.spec.size, ks)]


@dataclass
class Tally:
    cases: int = 0
    elements: int = 0
    equal: int = 0
    refused: int = 0  # draws the verifier refused (drawn again)
    seconds: float = 0.0
    differences: list[str] = field(default_factory=list)


def opsets_of(op: str) -> list[int]:
    return [k for k, table in OPSETS.items() if op in table]


def draw_model(op: str, seed: int, case: int) -> tuple[cvm.Model, dict, Draw, int]:
    """The instance's verified model, its explicit input values, the Draw that continues, and how
    many draws the verifier refused first."""
    d = Draw(seed, op, case)
    for refused in range(MAX_TRIES):
        b = GraphBuilder(opset=d.pick(opsets_of(op)))
        out, values = DRAWS[op](d, b)
        try:
            return b.build(out), values, d, refused
        except cvm.VerifyError:
            continue
    raise RuntimeError(f"{op} case {case}: {MAX_TRIES} draws refused by the verifier")


def _inputs(model: cvm.Model, values: dict, d: Draw) -> dict[str, np.ndarray]:
    out = {}
    for spec in model.graph.inputs:
        v = values[spec.name] if spec.name in values else d.signed(spec.shape, spec.bits)
        out[spec.name] = v.reshape((1, *spec.shape)).astype(storage_dtype(spec.bits))
    return out


def _elements(d: Draw, n: int, k: int) -> list[int]:
    chosen = {int(e) for e in d.rng.integers(0, n, k)}
    chosen |= {e for e in (0, n - 1) if d.chance(0.2)}
    return sorted(chosen)


def build(op: str, seed: int, case: int) -> tuple[Instance, int]:
    """Instance `case` of `op` for `seed`, and how many draws the verifier refused before it."""
    model, values, d, refused = draw_model(op, seed, case)
    return instance(model, _inputs(model, values, d), lambda n: _elements(d, n, ELEMENTS), case), refused


def instance(model: cvm.Model, inputs: dict, elements=range, case: int = -1) -> Instance:
    """The last node of `model` on `inputs` (one sample) as an instance: `elements(n)` picks the
    elements checked of its n (default all), the reference interpreter gives their values."""
    tensors = reference.run(model.graph, model.analysis, inputs, keep_all=True)
    tensors.update(model.graph.constants)
    node = model.graph.nodes[-1]
    spec = mc.node_spec(model, len(model.graph.inputs) + len(model.graph.nodes) - 1)
    chosen = list(elements(spec.out_numel))
    data = [trace.wire_bytes(tensors[name]) for name in node.inputs]
    operands = []  # the words read, without proofs (the harness trusts them)
    for d_, size, ks in zip(data, spec.size, reads(spec, data, chosen)):
        words, idx = trace.words(d_), sorted({k * size // trace.WORD for k in ks})
        operands.append((idx, [words[w] for w in idx], []))
    out = tensors[node.output].reshape(-1)
    shapes = [tuple(tensors[n].shape[1:] if n not in model.graph.constants else tensors[n].shape) for n in node.inputs]
    label = f"{node.op} opset {model.graph.opset} case {case}: inputs {shapes} attrs {dict(node.attrs)}"
    return Instance(node.op, case, label, spec, operands, chosen, [int(out[e]) for e in chosen], data)


# ------------------------------------------------------------------ the referee on the embedded chain

HARNESS = Path(__file__).resolve().parents[2] / "tests/chain/artifacts"
SPECS_TYPE = f"{mc.SPEC_TYPE}[]"
OPERANDS_TYPE = "(uint256[],bytes32[],bytes32[])[][]"
CALL_GAS = 900_000_000  # an eth_call's gas: a batch stays far below it (a read is ~2,400)


class Harness:
    """RefereeHarness.computeAll on a fresh embedded chain. The call is encoded here with eth_abi:
    web3's argument checks on thousands of nested tuples cost more than the EVM run."""

    def __init__(self):
        from eth_abi import decode, encode
        from eth_utils import function_signature_to_4byte_selector

        from cvm.chain.contracts import deploy
        from cvm.chain.embedded import EmbeddedChain
        from cvm.chain.store import ModelStore
        self._tmp = tempfile.TemporaryDirectory()
        self.chain = EmbeddedChain(ModelStore(self._tmp.name), backend="reference")
        contract, _ = deploy(self.chain.w3, self.chain.keys[0], "RefereeHarness", directory=HARNESS)
        self.address = contract.address
        types = [SPECS_TYPE, OPERANDS_TYPE, "uint256[]", "uint256[]"]
        self._selector = function_signature_to_4byte_selector(f"computeAll({','.join(types)})")
        self._encode = lambda args: encode(types, args)
        self._decode = lambda data: decode(["int256[]"], data)[0]

    def compute(self, batch: list[Instance]) -> list[list[int]]:
        """Each instance's elements as the referee computes them (raises where a call reverts)."""
        start = [0]
        for inst in batch:
            start.append(start[-1] + len(inst.elements))
        args = ([i.spec.as_tuple() for i in batch], [i.operands for i in batch],
                [e for i in batch for e in i.elements], start)
        data = self.chain.w3.eth.call({"to": self.address, "data": self._selector + self._encode(args),
                                       "gas": CALL_GAS})
        values = list(self._decode(data))
        return [values[start[k]:start[k + 1]] for k in range(len(batch))]


def compare(harness: Harness, batch: list[Instance], tally: Tally) -> None:
    """Adds the batch's elements to the tally; where the batch reverts, each instance alone."""
    try:
        results = harness.compute(batch)
    except Exception as e:  # a revert: find the instance (a valid instance never reverts)
        if len(batch) > 1:
            for inst in batch:
                compare(harness, [inst], tally)
            return
        tally.elements += len(batch[0].elements)
        tally.differences.append(f"{batch[0].label}: the referee reverted: {str(e)[:300]}")
        return
    for inst, got in zip(batch, results):
        for e, want, have in zip(inst.elements, inst.expected, got):
            tally.elements += 1
            if want == have:
                tally.equal += 1
            else:
                tally.differences.append(f"{inst.label}: element {e}: reference {want}, referee {have}")


def run_op(harness: Harness, op: str, cases: int, seed: int, first: int = 0, batch: int = 50) -> Tally:
    """`cases` instances of `op` (numbered from `first`), compared in eth_calls of `batch` instances."""
    tally = Tally()
    t0 = time.perf_counter()
    pending: list[Instance] = []
    for case in range(first, first + cases):
        inst, refused = build(op, seed, case)
        tally.cases += 1
        tally.refused += refused
        pending.append(inst)
        if len(pending) == batch or case == first + cases - 1:
            compare(harness, pending, tally)
            pending = []
    tally.seconds = time.perf_counter() - t0
    return tally


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cvm.chain.referee_diff", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=500, help="instances per op (default 500, as CI)")
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--first", type=int, default=0, help="number of the first instance (to replay one)")
    p.add_argument("--ops", default=",".join(REFEREE_OPS), help="comma-separated ops (default: every refereed op)")
    args = p.parse_args(argv)
    harness = Harness()
    total = Tally()
    print(f"{'op':<18}{'cases':>8}{'elements':>10}{'equal':>10}{'diffs':>7}{'refused':>9}{'seconds':>9}")
    for op in args.ops.split(","):
        t = run_op(harness, op, args.cases, args.seed, args.first)
        print(f"{op:<18}{t.cases:>8}{t.elements:>10}{t.equal:>10}{len(t.differences):>7}{t.refused:>9}"
              f"{t.seconds:>9.1f}", flush=True)
        for line in t.differences[:20]:
            print("  " + line)
        for name in ("cases", "elements", "equal", "refused", "seconds"):
            setattr(total, name, getattr(total, name) + getattr(t, name))
        total.differences += t.differences
    print(f"seed {args.seed}: {total.cases} cases, {total.elements} elements, {total.equal} equal, "
          f"{len(total.differences)} differences ({total.seconds:.0f} s)")
    return 1 if total.differences else 0


if __name__ == "__main__":
    sys.exit(main())
