#!/usr/bin/env bash
# Sets up everything and runs the main job: the end-to-end demo on the embedded chain.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/cvm demo "$@"
