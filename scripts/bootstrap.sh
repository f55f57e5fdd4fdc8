#!/usr/bin/env bash
# Set up p2pnode on a fresh machine: virtual environment, torch first (CPU build), the package
# with its dev tools, and the MovieLens-100k dataset. Idempotent: re-running is quick.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3.11}"
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first: a later dependency asking for any torch would otherwise pull the CUDA build.
if ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  .venv/bin/python -m pip install --quiet torch==2.13.0
fi
.venv/bin/python -m pip install --quiet -e '.[dev,fast,deploy,cluster,notebook]'
.venv/bin/p2pnode data get ml-100k
# compile the fused training kernels once (numba caches them beside learning/; ~10 s the first
# time for GMF's, a few for PRME's and the DP-SGD step's, ~30 s for PARD's estimators)
.venv/bin/python -m learning.gmf_fused
.venv/bin/python -m learning.prme_fused
.venv/bin/python -m learning.gmf_dp_fused
.venv/bin/python -m adversary.fictive_fused
.venv/bin/python -m learning.pard
