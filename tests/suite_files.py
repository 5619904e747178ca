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
