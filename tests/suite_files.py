"""A conformance suite regenerated into a temporary folder must equal the committed one byte for byte
(platforms.json aside: it records runs, not cases). Shared by the tests of suites v1-v4."""
from pathlib import Path

from cvm.conformance import generate


def suite_files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "platforms.json"}


def assert_regenerates(suite: Path, version: int, tmp_path: Path) -> None:
    generate(tmp_path, version=version)
    committed, fresh = suite_files(suite), suite_files(tmp_path)
    where = suite.relative_to(suite.parents[2])
    assert sorted(fresh) == sorted(committed), \
        f"run `python -m cvm.conformance generate {where} --version {version}` and commit the suite"
    changed = [name for name in fresh if fresh[name] != committed[name]]
    assert not changed, f"regenerated files differ: {changed[:5]} (suite v{version} is frozen once shipped)"


def assert_recorded_platforms(suite: Path, manifest: dict) -> None:
    """platforms.json: scripts/crossplatform/run.sh i386|arm64 --record (CVM_CONFORMANCE_DIR pointing at the
    suite) and the host (`cvm conformance ... --json`, `python -m cvm.conformance record`): x86-64, 32-bit x86
    (where a reference that indexes with int64 breaks: np.take casts indices to intp) and ARM passed every case."""
    import json
    platforms = json.loads((suite / "platforms.json").read_text())["platforms"]
    assert {"x86_64", "i686", "aarch64"} <= {p["machine"] for p in platforms}
    for p in platforms:
        assert p["passed"] == p["cases"] == len(manifest["cases"]) and not p["failed"], p["label"]
        assert p["suite_version"] == manifest["version"], p["label"]
