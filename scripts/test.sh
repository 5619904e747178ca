#!/usr/bin/env bash
# Sets up everything and runs the whole test suite:
#   1. ruff and the size budget (scripts/check_budget.py), then the main suite in .venv (numpy 2):
#      unit, property-based, conformance, chain, anvil;
#   2. the FHE tests and the hash-stability tests in .venv-fhe (concrete-python, numpy 1.x);
#   3. the conformance suites (v1, v2 and v3) in a 32-bit x86 Debian userland (when running as root, as CI does).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
bash scripts/setup.sh || exit 1
.venv/bin/ruff check . || status=1                      # the lint rules in pyproject.toml
.venv/bin/python scripts/check_budget.py || status=1    # function and file size budget
.venv/bin/python -m pytest -n 2 -q --ignore=tests/fhe "$@" || status=1
if [ -f scripts/setup_fhe.sh ]; then
  bash scripts/setup_fhe.sh || exit 1
  .venv-fhe/bin/python -m pytest -q -p no:cacheprovider tests/fhe tests/test_hash_stability.py || status=1
fi
if [ "$(id -u)" = 0 ] && [ "${CVM_SKIP_XPLAT:-0}" != 1 ]; then
  bash scripts/crossplatform/run.sh i386 || status=1
  CVM_CONFORMANCE_DIR=fixtures/conformance/v2 bash scripts/crossplatform/run.sh i386 || status=1
  CVM_CONFORMANCE_DIR=fixtures/conformance/v3 bash scripts/crossplatform/run.sh i386 || status=1
fi
exit $status
