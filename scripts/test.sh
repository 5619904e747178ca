#!/usr/bin/env bash
# Sets up everything and runs the whole test suite:
#   1. ruff, the size budget (scripts/check_budget.py) and the import contracts (lint-imports), then the
#      main suite in .venv (numpy 2):
#      unit, property-based, conformance, chain, anvil;
#   2. the FHE tests, the hash-stability tests and the numba backend's equality tests in .venv-fhe
#      (concrete-python, numpy 1.x);
#   3. the conformance suites (v1 to v4) in a 32-bit x86 Debian userland (when running as root, as CI does).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
bash scripts/setup.sh || exit 1
.venv/bin/ruff check . || status=1                      # the lint rules in pyproject.toml
.venv/bin/python scripts/check_budget.py || status=1    # function and file size budget
.venv/bin/lint-imports --no-cache || status=1           # no import loops; the layers (pyproject.toml)
.venv/bin/python -m pytest -n 2 -q --ignore=tests/fhe "$@" || status=1
if [ -f scripts/setup_fhe.sh ]; then
  bash scripts/setup_fhe.sh || exit 1
  .venv-fhe/bin/python -m pytest -q -p no:cacheprovider tests/fhe tests/test_hash_stability.py || status=1
  # The numba backend under numpy 1.x: suite v3 (every v1 and v2 case, golden output hashes) and the
  # random-graph equality to the reference at 50 examples a family (each family's lowerings under numpy
  # 1's dtype rules; the main suite's 1000 hunt for rare cases). About 10 s once compiled; cold, a few
  # minutes (this environment's kernels have their own cache key: numpy's version is in it).
  CVM_HYPOTHESIS_EXAMPLES=50 .venv-fhe/bin/python -m pytest -q -p no:cacheprovider \
    "tests/test_conformance_v3.py::test_backends_pass_suite_v3[numba]" tests/numba/test_numba_equivalence.py || status=1
fi
if [ "$(id -u)" = 0 ] && [ "${CVM_SKIP_XPLAT:-0}" != 1 ]; then
  bash scripts/crossplatform/run.sh i386 || status=1
  CVM_CONFORMANCE_DIR=fixtures/conformance/v2 bash scripts/crossplatform/run.sh i386 || status=1
  CVM_CONFORMANCE_DIR=fixtures/conformance/v3 bash scripts/crossplatform/run.sh i386 || status=1
  CVM_CONFORMANCE_DIR=fixtures/conformance/v4 bash scripts/crossplatform/run.sh i386 || status=1
fi
exit $status
