#!/usr/bin/env bash
# Creates .venv-fhe: the project with the fhe extra (concrete-python), kept apart from .venv because
# concrete-python 2.11 pins numpy<2 and needs setuptools<81 (idempotent: a second run installs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-fhe
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# torch first, at exactly this version: the CPU wheel on disk (any other version is a multi-GB download).
if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
  "$VENV/bin/pip" install -q "setuptools<81" torch==2.13.0
fi
"$VENV/bin/pip" install -q -e ".[fhe,dev]"
# cvm.interp.numba too: the numba backend runs here as well (scripts/test.sh holds it to the reference)
"$VENV/bin/python" -W ignore -c "import numpy, numba, concrete.fhe, cvm, cvm.interp.fhe, cvm.interp.numba; assert numpy.__version__ < '2'"
