"""Where a round's gas goes: the demo run with SSTORE, SLOAD, LOG and KECCAK gas tallied per transaction.

    .venv/bin/python -m cvm.chain.gasprofile              (InferenceOracle's round: `cvm demo`)
    .venv/bin/python -m cvm.chain.gasprofile --batched    (BatchedOracle's: cvm/chain/batch_demo.py)

py-evm's opcode table is wrapped so each of these opcodes records what it charged; SSTOREs are
grouped by their charge (22,100 / 20,000: an empty slot filled, cold / warm; 2,900: a nonzero slot
rewritten; 100: a slot written again in the same transaction). Gas estimations run the same
transactions, so each mined one is printed once, after its estimates, with its receipt's gas.
Used to find what to cut in the oracle round (docs/chain.md, "Gas (measured)").
"""

from __future__ import annotations

import collections
import sys

from eth.vm.forks.prague.computation import PragueComputation
from eth.vm.forks.prague.state import PragueState

OPCODES = {0x55: "SSTORE", 0x54: "SLOAD", 0x20: "KECCAK", 0xA1: "LOG1", 0xA2: "LOG2", 0xA3: "LOG3", 0xA4: "LOG4"}


class Profile:
    """Tallies per transaction: {opcode label: [count, gas]}, with the transaction's gas used."""

    def __init__(self):
        self.current: dict | None = None
        self.rows: list[tuple[int, dict]] = []

    def install(self) -> None:
        for code, name in OPCODES.items():
            PragueComputation.opcodes[code] = self._wrap(PragueComputation.opcodes[code], name)
        apply = PragueState.apply_transaction
        profile = self

        def apply_transaction(state, tx):
            profile.current = collections.defaultdict(lambda: [0, 0])
            computation = apply(state, tx)
            spent = tx.gas - computation.get_gas_remaining()
            used = spent - min(computation.get_gas_refund(), spent // 5)  # the receipt's gasUsed
            profile.rows.append((used, dict(profile.current)))
            profile.current = None
            return computation

        PragueState.apply_transaction = apply_transaction

    def _wrap(self, fn, name):
        profile = self

        def opcode(computation):
            before = computation._gas_meter.gas_remaining
            fn(computation=computation)
            if profile.current is not None:
                cost = before - computation._gas_meter.gas_remaining
                tally = profile.current[f"SSTORE {cost}" if name == "SSTORE" else name]
                tally[0] += 1
                tally[1] += cost

        opcode.mnemonic = name
        return opcode

    def report(self, gas_used: set[int]) -> str:
        """One line per transaction whose gas used is one of `gas_used` (the mined ones)."""
        lines, seen = [], set()
        for used, tally in reversed(self.rows):  # the last run of each transaction is the mined one
            if used in gas_used and used not in seen:
                seen.add(used)
                detail = "; ".join(f"{k} {n}x = {g:,}" for k, (n, g) in sorted(tally.items()))
                lines.append(f"{used:>9,}  {detail}")
        return "\n".join(reversed(lines))


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m cvm.chain.gasprofile", description=__doc__.splitlines()[0])
    p.add_argument("--batched", action="store_true", help="profile BatchedOracle's round instead")
    args = p.parse_args(argv)
    profile = Profile()
    profile.install()
    from cvm.chain import batch_demo, demo  # after install: the chain's VM classes derive from the patched ones

    rows: list[list] = []
    report = demo.report

    def keep(gas, checks):
        rows.extend(gas)
        return report(gas, checks)

    demo.report = keep
    rc = batch_demo.run_batched_demo() if args.batched else demo.run_demo()
    print("\nper transaction (gas used: opcode count = gas):")
    print(profile.report({int(r[1]) for r in rows}))
    return rc


if __name__ == "__main__":
    sys.exit(main())
