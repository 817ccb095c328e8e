#!/usr/bin/env bash
# Rebuild assets/demo/bundle/ from scratch by really running every attempt.
#
#   bash assets/demo/regenerate.sh
#
# Environment:
#   WORKBENCH_DEMO_VENV  torch_xla virtual environment (default: <repo>/.venv-xla); created and
#                        filled from requirements-xla-cpu.txt when missing (cold: ~2-3 min, ~6 GB)
#   PYTHON               interpreter used to create the venv and run the generator (default python3,
#                        must be 3.11: the pinned wheels are cp311)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
VENV="${WORKBENCH_DEMO_VENV:-$ROOT/.venv-xla}"

if ! "$VENV/bin/python" -c "import torch, torch_xla" >/dev/null 2>&1; then
    echo "== creating torch_xla venv at $VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --no-deps -r "$HERE/requirements-xla-cpu.txt"
fi
"$VENV/bin/python" -c "import torch, torch_xla; print('== torch', torch.__version__, 'torch_xla', torch_xla.__version__)" 2>/dev/null

echo "== running the migrations"
"$PY" "$HERE/generate.py" --venv "$VENV" --out "$HERE/bundle"

echo "== checking the bundle"
"$PY" "$HERE/check_bundle.py" "$HERE/bundle"
