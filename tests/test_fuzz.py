"""Mutation fuzzing of .cvm files (cvm/fuzz/, docs/fuzzing.md): fixed seeds, a few thousand cases,
split by seed-model group so xdist runs the groups in parallel. The long run is `cvm fuzz`."""
from __future__ import annotations

import numpy as np
import pytest

import cvm
from cvm import fuzz

ALL = fuzz.seed_paths()
FIXTURES = [p for p in ALL if p.parent.name == "models" and p.parent.parent.name == "fixtures"]
CONFORMANCE = [p for p in ALL if p not in FIXTURES]
GROUPS = {
    "fixtures": (FIXTURES, 3000),
    "conformance-0": (CONFORMANCE[0::3], 2500),
    "conformance-1": (CONFORMANCE[1::3], 2500),
    "conformance-2": (CONFORMANCE[2::3], 2500),
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_fuzz_group(group):
    paths, cases = GROUPS[group]
    assert paths, f"no seed models for {group}"
    report = fuzz.fuzz(paths, cases, seed=20240 + sorted(GROUPS).index(group))
    findings = "\n".join(f"{f.kind} case {f.case} ({f.seed_model}; {'; '.join(f.steps)}): {f.detail}"
                         for f in report.crashes + report.disagreements)
    assert report.cases == cases
    assert not report.crashes and not report.disagreements, f"{group}:\n{report.summary()}\n{findings}"
    # Not a fuzzer that rejects everything, nor one that never gets past the loader.
    assert sum(report.rejected.values()) >= cases // 4, report.summary()
    assert report.ran >= cases // 20, report.summary()
    assert report.rejected["FormatError"] and report.rejected["VerifyError"], report.summary()


def test_mutator_is_deterministic():
    seeds = fuzz.load_seeds(ALL[:8])
    a = [fuzz.make_case(seeds, 7, i) for i in range(60)]
    b = [fuzz.make_case(seeds, 7, i) for i in range(60)]
    assert [(s.name, d, st) for s, d, st in a] == [(s.name, d, st) for s, d, st in b]
    c = [fuzz.make_case(seeds, 8, i)[1] for i in range(60)]
    assert c != [d for _, d, _ in a]
    assert len({d for _, d, _ in a}) > 50  # the cases differ from each other


def test_report_is_deterministic():
    r1 = fuzz.fuzz(FIXTURES[:2], 80, seed=3)
    r2 = fuzz.fuzz(FIXTURES[:2], 80, seed=3)
    assert (r1.rejected, r1.reasons, r1.ran, r1.run_errors) == (r2.rejected, r2.reasons, r2.ran, r2.run_errors)


def test_canonical_pack_matches_the_format():
    for p in ALL[:10]:
        seed = fuzz.load_seeds([p])[0]
        assert fuzz.pack(seed.graph) == cvm.load(p).consensus_bytes
    loose = fuzz.pack_loose(seed.graph, np.random.default_rng(0))
    with pytest.raises(cvm.FormatError, match="not canonical"):
        cvm.loads(fuzz.encode(seed.graph, seed.meta, np.random.default_rng(0), loose="graph"))
    assert loose != fuzz.pack(seed.graph)


def test_oracle_flags_a_crash_and_a_disagreement(tmp_path, monkeypatch):
    """A planted backend bug is found, saved, and replays; the fixed build passes the saved cases."""
    from cvm.interp import reference
    real_prepare = reference.prepare

    def broken(graph, analysis):
        def run(inputs):
            raise ZeroDivisionError("planted")
        return run

    monkeypatch.setattr(reference, "prepare", broken)
    report = fuzz.fuzz(FIXTURES[:2], 30, seed=0, save_dir=tmp_path)
    assert report.crashes and not report.ok
    assert all("reference run: ZeroDivisionError: planted" in f.detail for f in report.crashes)
    saved = sorted(tmp_path.glob("crash-*.cvm"))
    assert len(saved) == len(report.crashes) and all(p.with_suffix(".json").exists() for p in saved)
    assert all(fuzz.replay(p).kind == "crash" for p in saved)

    def wrong(graph, analysis):
        inner = real_prepare(graph, analysis)
        return lambda inputs: {k: v + 1 for k, v in inner(inputs).items()}

    monkeypatch.setattr(reference, "prepare", wrong)
    assert {fuzz.replay(p).kind for p in saved} == {"disagreement"}
    monkeypatch.setattr(reference, "prepare", real_prepare)
    assert {fuzz.replay(p).kind for p in saved} <= {"ran", "run_error", "too_big"}
    assert fuzz.main(["--replay", str(saved[0])]) == 0


def test_cli_runs_and_summarises(tmp_path, capsys):
    rc = fuzz.main(["--cases", "40", "--seed", "1", "--quiet", "--seeds", *map(str, CONFORMANCE[:4]),
                    "--save-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "cvm fuzz --cases 40 --seed 1: 4 seed models" in out and "disagreements" in out
