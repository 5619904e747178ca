#!/usr/bin/env bash
# Creates .venv with the project and every extra the demo and the tests need (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# System packages the tests need, by Debian name: fonts-dejavu-core draws the OCR test lines
# (scripts/models/ocr_data.py loads its files by path and checks their hashes). As root (CI) they are
# installed when missing, after one apt-get update; otherwise a missing one is named.
APT_PACKAGES="fonts-dejavu-core"
missing=$(for p in $APT_PACKAGES; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
  else
    echo "setup: install the Debian package(s) $missing (sudo apt-get install $missing)" >&2
  fi
fi
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
