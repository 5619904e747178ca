"""The README and docs as a new user follows them (issue 38): the README's Python snippet runs as written, its
documented commands run in their cheap forms, the conformance counts the docs state are the manifests', the
committed mnist_cnn.cvm hash the README explains is the one conformance v1 pins, and the tree measurement's
--data run works on a fresh clone."""
import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

from cvm.cli import main as cvm_main
from mrt.cli import main as mrt_main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CONFORMANCE_MD = (ROOT / "docs" / "conformance.md").read_text()


@pytest.fixture
def clone(tmp_path, monkeypatch):
    """A working directory that sees the repository's fixtures where the README's relative paths expect them."""
    (tmp_path / "fixtures").symlink_to(ROOT / "fixtures")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_readme_python_snippet_runs_as_written(clone, capsys):
    snippet = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    exec(compile(snippet, "README.md", "exec"), {})
    printed = capsys.readouterr().out.split()
    assert re.fullmatch(r"0x[0-9a-f]{64}", printed[0]) and re.fullmatch(r"0x[0-9a-f]{64}", printed[1])
    assert (clone / "digits.cvm").exists()


def _documented(command: str) -> list[str]:
    """The command's words, after checking that the README shows it as written."""
    assert command in README, f"README no longer shows: {command}"
    return shlex.split(command)


def _run(words: list[str]) -> int:
    return {"mrt": mrt_main, "cvm": cvm_main}[words[0]](words[1:])


def test_documented_commands_cheap_forms(clone, capsys):
    for command in ("mrt stages", "cvm run fixtures/cvm/tiny_cnn.cvm --input fixtures/cvm/tiny_cnn_input.npy --raw",
                    "mrt convert fixtures/models/digits_mlp.onnx --calib fixtures/data/digits_mlp_calib.npz "
                    "--target fhe -o digits_fhe.cvm"):
        assert _run(_documented(command)) == 0, command
    # the mnist lines on the committed conversion (the README converts it first: 10 s more)
    for command in ("cvm inspect mnist.cvm", "cvm verify mnist.cvm"):
        assert _run(_documented(command)[:-1] + ["fixtures/models/mnist_cnn.cvm"]) == 0, command
    run = _documented("cvm run digits_fhe.cvm -i fixtures/data/digits_mlp_test.npz --backend fhe --limit 4")
    assert _run(run[:run.index("--backend")] + ["--backend", "reference", "--limit", "4"]) == 0  # fhe: .venv-fhe
    out = capsys.readouterr().out
    assert "output: shape (4, 10)" in out and out.strip().splitlines()[-1].startswith("output-hash: 0x")
    for words in (["mrt", "convert", "--help"], ["cvm", "run", "--help"], ["mrt", "eval", "--help"]):
        with pytest.raises(SystemExit) as e:
            _run(words)
        assert e.value.code == 0


def _cases(version: int) -> int:
    return len(json.loads((ROOT / "fixtures" / "conformance" / f"v{version}" / "manifest.json").read_text())["cases"])


def test_conformance_counts_match_the_manifests():
    v1, v2, v3, v4 = _cases(1), _cases(2), _cases(3), _cases(4)
    assert f"Suite v1 has **{v1} cases**" in CONFORMANCE_MD
    assert f"has {v2} cases and suite v3 {v3}" in CONFORMANCE_MD and f"records {v3}/{v3}" in CONFORMANCE_MD
    assert f"holds {v1} cases" in README and f"({v2} cases" in README and f"({v3} cases" in README
    assert f"({v4} cases" in README
    stated = {int(n) for n in re.findall(r"(\d+) cases", CONFORMANCE_MD + README)}
    assert stated <= {v1, v2, v3, v4, 57}, stated  # 57: the first v1 runs, named as such


def test_committed_mnist_hash_is_the_one_readme_explains():
    from cvm import load
    committed = load(ROOT / "fixtures" / "models" / "mnist_cnn.cvm").hash_hex
    assert f"`{committed[:10]}...`" in README
    pinned = {c["name"]: c["model_hash"] for c in json.loads(
        (ROOT / "fixtures" / "conformance" / "v1" / "manifest.json").read_text())["cases"]}
    assert pinned["model.mnist_cnn"] == committed  # why it stays as it is


def test_tree_measurement_data_run_on_a_fresh_clone(tmp_path, monkeypatch, capsys):
    spec = importlib.util.spec_from_file_location("trees_measure", ROOT / "scripts" / "trees" / "measure.py")
    measure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(measure)
    monkeypatch.setattr(measure, "LAST", ROOT / ".cache" / "no_such_dir" / "trees_measure.json")
    assert measure.partial_run("iris", 2) == 0  # `measure.py --quick --data iris` before any full run
    out, err = capsys.readouterr()
    assert "| dt_iris | iris |" in out and "needs one full run first" in err
    assert not measure.LAST.parent.exists()
    assert measure.partial_run("nope", 2) == 2
    assert "no tree fixture uses data set 'nope'" in capsys.readouterr().err
