"""`cvm demo` end to end on the embedded chain, through the CLI entry point."""

import pytest
from chainkit import BACKEND

from cvm.cli import main

pytestmark = pytest.mark.chain


def test_demo_passes_every_check(capsys):
    assert main(["demo", "--backend", BACKEND, "--index", "3"]) == 0
    out = capsys.readouterr().out
    assert "demo: all checks passed" in out
    for step in ("deploy InferenceOracle", "register model", "request (DigitGame.play)", "commit (operator 1)",
                 "finalise + callback", "DigitGame.playNow (precompile)"):
        assert step in out
