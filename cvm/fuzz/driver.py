"""The fuzz loop: cases made, checked and counted, findings kept (and saved for `replay`).

`fuzz(seeds, cases, seed)` is deterministic given its arguments (timings aside): each case is
rebuilt from (run seed, case number) by `mutations.make_case` and its inputs drawn from the same
pair, so a saved finding's .json is all `replay` needs to check it again with the same inputs.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..model_file import read_model_file
from .mutate_nodes import templates
from .mutations import case_rng, make_case
from .oracle import MAX_RUN_GAS, Outcome, check
from .seeds import Seed, load_seeds

SLOW_SECONDS = 10.0  # a case slower than this (load, verify, both runs) is a finding


@dataclass
class Finding:
    """A case worth a person's look, with the steps that made it, so it can be understood without rerunning."""
    case: int
    seed_model: str
    kind: str  # crash | disagreement | slow
    detail: str
    steps: list[str]
    seconds: float
    path: str | None = None  # the saved .cvm, when a save directory was given


@dataclass
class Report:
    """Counts by outcome (what the verifier and decoder rejected, and why, shows what the cases reach) and
    the findings themselves."""
    cases: int = 0
    rejected: Counter = field(default_factory=Counter)  # error class -> count
    reasons: Counter = field(default_factory=Counter)  # "Class: first words" -> count
    accepted: int = 0
    ran: int = 0  # both backends returned, equal hashes
    run_errors: Counter = field(default_factory=Counter)  # both backends raised this CVMError class
    too_big: int = 0
    crashes: list[Finding] = field(default_factory=list)
    disagreements: list[Finding] = field(default_factory=list)
    slow: list[Finding] = field(default_factory=list)
    seconds: float = 0.0
    max_case_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Slow cases do not count: they depend on the machine, crashes and disagreements never do."""
        return not self.crashes and not self.disagreements

    def summary(self) -> str:
        from ..report import table
        rows = [["cases", self.cases], ["rejected", sum(self.rejected.values())]]
        rows += [[f"  {k}", v] for k, v in sorted(self.rejected.items(), key=lambda kv: -kv[1])]
        rows += [["accepted", self.accepted], ["  ran, hashes equal", self.ran],
                 ["  same CVMError on both", sum(self.run_errors.values())]]
        rows += [[f"    {k}", v] for k, v in sorted(self.run_errors.items(), key=lambda kv: -kv[1])]
        rows += [["  too big to run", self.too_big], ["crashes", len(self.crashes)],
                 ["disagreements", len(self.disagreements)], ["slow cases", len(self.slow)],
                 ["seconds", f"{self.seconds:.1f}"], ["slowest case (s)", f"{self.max_case_seconds:.2f}"]]
        return table(["outcome", "count"], rows, "lr")


def fuzz(seeds: list[Seed] | Iterable[str | Path], cases: int, seed: int = 0, *, save_dir: str | Path | None = None,
         time_limit: float | None = None, slow_seconds: float = SLOW_SECONDS, max_gas: int = MAX_RUN_GAS,
         progress: Callable[[int, Report], None] | None = None) -> Report:
    """Run `cases` cases (fewer if `time_limit` seconds pass first); deterministic given (seeds, cases, seed)."""
    seeds = list(seeds)
    if seeds and not isinstance(seeds[0], Seed):
        seeds = load_seeds(seeds)
    library = templates(seeds)
    report = Report()
    t0 = time.perf_counter()
    for i in range(cases):
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            break
        s, data, steps = make_case(seeds, seed, i, library)
        out = check(data, case_rng(seed, i, 1), max_gas=max_gas)
        report.cases += 1
        report.max_case_seconds = max(report.max_case_seconds, out.seconds)
        if out.kind == "rejected":
            report.rejected[out.detail.split(":")[0]] += 1
            report.reasons[out.detail] += 1
        else:
            report.accepted += 1
            if out.kind == "ran":
                report.ran += 1
            elif out.kind == "run_error":
                report.run_errors[out.detail] += 1
            elif out.kind == "too_big":
                report.too_big += 1
        kinds = [out.kind] if out.kind in ("crash", "disagreement") else []
        if out.seconds > slow_seconds:
            kinds.append("slow")
        for kind in kinds:
            f = Finding(i, s.name, kind, out.detail if kind != "slow" else f"{out.seconds:.1f} s ({out.kind})",
                        steps, out.seconds)
            if save_dir is not None:
                f.path = str(save_case(save_dir, seed, f, data))
            {"crash": report.crashes, "disagreement": report.disagreements, "slow": report.slow}[kind].append(f)
        if progress is not None:
            progress(i, report)
    report.seconds = time.perf_counter() - t0
    return report


def save_case(directory: str | Path, seed: int, f: Finding, data: bytes) -> Path:
    """Write the case's file and a .json beside it that `replay` reads (the input draw, the finding)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{f.kind}-seed{seed}-case{f.case}.cvm"
    path.write_bytes(data)
    info = {"seed": seed, "case": f.case, "seed_model": f.seed_model, "kind": f.kind, "detail": f.detail,
            "steps": f.steps}
    path.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n")
    return path


def replay(path: str | Path) -> Outcome:
    """Check a saved case again, with the same input draw when its .json is beside it."""
    path = Path(path)
    info_path = path.with_suffix(".json")
    seed, case = 0, 0
    if info_path.exists():
        info = json.loads(info_path.read_text())
        seed, case = info["seed"], info["case"]
    return check(read_model_file(path), case_rng(seed, case, 1))
