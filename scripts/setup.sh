#!/usr/bin/env bash
# Create .venv and install EvoKernel TUI with its test tools. Safe to run again: it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
# The CPU build of torch from local disk first, so nothing pulls a multi-GB CUDA build.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[test,bench]"
echo "EvoKernel TUI is installed in .venv ($(.venv/bin/evokernel --version))"
