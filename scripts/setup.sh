#!/usr/bin/env bash
# Creates .venv with the project and every extra the demo and the tests need (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install -q --upgrade pip
fi
# setuptools' "Editable installation ... careful with folders ... same name" notice (a warning pip shows even
# with -q) says nothing actionable here: the packages are the top-level cvm/ and mrt/ themselves.
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/pip install -q -e ".[mrt,chain,dev]"
if [ -f contracts/package.json ] && [ ! -d contracts/node_modules ]; then
  (cd contracts && npm ci --no-audit --no-fund --loglevel=error)
fi
