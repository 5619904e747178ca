"""`cvm fuzz` (registered on the cvm command line by `register`) and `python -m cvm.fuzz` (`main`):
the same options either way; progress to stderr, the summary table and the findings to stdout, exit
status 1 when any case crashed or disagreed.
"""
from __future__ import annotations

import argparse
import sys

from .. import CVMError
from .driver import SLOW_SECONDS, fuzz, replay
from .seeds import load_seeds, seed_paths


def _add_arguments(s: argparse.ArgumentParser) -> None:
    """The options, shared by `cvm fuzz` and `python -m cvm.fuzz` so that the two cannot drift apart."""
    s.add_argument("--cases", type=int, default=1000, help="number of cases (default 1000)")
    s.add_argument("--seed", type=int, default=0, help="run seed: the same seed gives the same cases")
    s.add_argument("--time-limit", type=float, default=None, help="stop after this many seconds")
    s.add_argument("--save-dir", default=None, help="write crashing, disagreeing and slow cases here")
    s.add_argument("--seeds", nargs="+", default=None, help="seed .cvm files (default: every committed model)")
    s.add_argument("--slow", type=float, default=SLOW_SECONDS, help=f"seconds a case may take (default {SLOW_SECONDS:g})")
    s.add_argument("--replay", nargs="+", default=None, metavar="CASE.cvm", help="check saved cases again instead")
    s.add_argument("--reasons", type=int, default=0, metavar="N", help="also list the N commonest rejection reasons")
    s.add_argument("--quiet", action="store_true", help="no progress output")


def cmd_fuzz(args) -> int:
    """Replay saved cases, or run a fuzz campaign with a progress bar (tqdm when installed, a line every
    500 cases otherwise), then print the summary and every finding; 1 when any case crashed or disagreed."""
    if args.replay:
        bad = 0
        for p in args.replay:
            out = replay(p)
            bad += out.kind in ("crash", "disagreement")
            print(f"{p}: {out.kind}: {out.detail} ({out.seconds:.2f} s)")
        return 1 if bad else 0
    seeds = load_seeds(args.seeds or seed_paths())
    progress, bar = None, None
    if not args.quiet:
        try:
            from tqdm import tqdm
            bar = tqdm(total=args.cases, unit="case", file=sys.stderr, smoothing=0.05)

            def progress(i, r):
                bar.update(1)
                if i % 50 == 0:
                    bar.set_postfix(rejected=sum(r.rejected.values()), ran=r.ran, crash=len(r.crashes),
                                    disagree=len(r.disagreements), refresh=False)
        except ImportError:
            def progress(i, r):
                if (i + 1) % 500 == 0:
                    print(f"{i + 1} cases: {sum(r.rejected.values())} rejected, {r.ran} ran, "
                          f"{len(r.crashes)} crashes, {len(r.disagreements)} disagreements", file=sys.stderr)
    try:
        report = fuzz(seeds, args.cases, args.seed, save_dir=args.save_dir, time_limit=args.time_limit,
                      slow_seconds=args.slow, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    print(f"cvm fuzz --cases {args.cases} --seed {args.seed}: {len(seeds)} seed models")
    print(report.summary())
    if args.reasons:
        from ..report import table
        print()
        rows = [[k, v] for k, v in report.reasons.most_common(args.reasons)]
        print(table(["rejection (class: first words)", "count"], rows, "lr"))
    for f in report.crashes + report.disagreements + report.slow:
        where = f" -> {f.path}" if f.path else ""
        print(f"{f.kind} case {f.case} (seed model {f.seed_model}; {'; '.join(f.steps)}): {f.detail}{where}")
    return 0 if report.ok else 1


# No docstring on purpose: `main` uses register.__doc__ as its description and falls back to a fixed line.
def register(subparsers) -> None:
    s = subparsers.add_parser("fuzz", help="mutation-fuzz the loader, verifier and backends with mutated models")
    _add_arguments(s)
    s.set_defaults(func=cmd_fuzz)


def main(argv=None) -> int:
    """`python -m cvm.fuzz`: the same options without the cvm front end; errors are one line (cvm.clikit)."""
    from ..clikit import OneLineParser, run_guarded
    p = OneLineParser(prog="cvm fuzz", description=register.__doc__ or "mutation fuzzing of .cvm files")
    _add_arguments(p)
    args = p.parse_args(argv)
    return run_guarded(lambda: cmd_fuzz(args), (CVMError, ValueError), "cvm fuzz")
