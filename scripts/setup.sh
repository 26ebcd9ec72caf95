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
# The trusted side's precompiled headers and common pybind bindings, so the first kernel after set-up
# compiles in seconds rather than a minute (once per machine; EVOKERNEL_SKIP_PREWARM=1 skips it).
if [ -z "${EVOKERNEL_SKIP_PREWARM:-}" ]; then
  echo "Prebuilding the verifier's shared headers and bindings (about a minute, once)..."
  .venv/bin/python -c "from verifier import VerifyConfig; from verifier.build.shared_artefacts import prewarm; r = VerifyConfig().root() / 'shared'; r.mkdir(parents=True, exist_ok=True); prewarm(r)" \
    || echo "Prebuild skipped (no C++ compiler?); the first kernel will build them instead."
fi
echo "EvoKernel TUI is installed in .venv ($(.venv/bin/evokernel --version))"
