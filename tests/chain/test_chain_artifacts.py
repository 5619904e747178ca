"""The committed artifacts are what solc-js makes of the sources, and the constants the Solidity
and Python sides share agree."""

import re
import shutil
import subprocess

import pytest
from chainkit import ROOT

from cvm.chain.contracts import load_artifact
from cvm.chain.precompile import CVM_PRECOMPILE_ADDRESS

pytestmark = pytest.mark.chain
CONTRACTS = ROOT / "contracts"


def test_committed_artifacts_match_a_fresh_compile():
    node = shutil.which("node")
    assert node, "node is needed to compile the contracts (scripts/setup.sh installs solc-js with npm)"
    assert (CONTRACTS / "node_modules" / "solc").is_dir(), "run scripts/setup.sh (npm ci in contracts/)"
    r = subprocess.run([node, str(CONTRACTS / "compile.js"), "--check"], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_compiler_settings():
    art = load_artifact("InferenceOracle")
    assert art["compiler"]["settings"]["evmVersion"] == "prague"
    assert art["compiler"]["settings"]["optimizer"]["enabled"]
    assert art["compiler"]["version"].startswith("0.8.")


def test_precompile_address_is_the_same_in_solidity_and_python():
    source = (CONTRACTS / "src" / "ICVM.sol").read_text()
    address = int(re.search(r"PRECOMPILE = address\((0x[0-9A-Fa-f]+)\)", source).group(1), 16)
    assert address.to_bytes(20, "big") == CVM_PRECOMPILE_ADDRESS
    assert int.from_bytes(CVM_PRECOMPILE_ADDRESS, "big") > 0x100  # clear of Ethereum's precompiles
