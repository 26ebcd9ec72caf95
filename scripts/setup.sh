#!/usr/bin/env bash
# Create .venv and install EvoKernel TUI with its test tools. Safe to run again: it only adds what is missing.
#
# Each step is one line with its elapsed time (on a terminal the seconds count up while it runs), so a
# slow install on a busy machine is visibly working; pip's and setuptools' own output goes to
# .venv/setup.log and is shown (its last lines) only when a step fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
mkdir -p .venv
LOG=.venv/setup.log
: >"$LOG"
STEP=0
TOTAL=4
[ -z "${EVOKERNEL_SKIP_PREWARM:-}" ] && TOTAL=5

# step LABEL COMMAND...: run COMMAND with its output in the log; one line saying what runs and for how long
step() {
  local label=$1 start=$SECONDS rc=0
  shift
  STEP=$((STEP + 1))
  printf '\n== [%d/%d] %s: %s\n' "$STEP" "$TOTAL" "$label" "$*" >>"$LOG"
  if [ -t 1 ]; then
    "$@" >>"$LOG" 2>&1 &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
      printf '\r[%d/%d] %s... %ds' "$STEP" "$TOTAL" "$label" $((SECONDS - start))
      sleep 1
    done
    wait "$pid" || rc=$?
    printf '\r\033[K'
  else
    "$@" >>"$LOG" 2>&1 || rc=$?
  fi
  if [ "$rc" -ne 0 ]; then
    printf '[%d/%d] %s... failed after %ds (exit %d). The last lines of %s:\n' \
      "$STEP" "$TOTAL" "$label" $((SECONDS - start)) "$rc" "$LOG"
    tail -n 25 "$LOG" | sed 's/^/  | /'
    return "$rc"
  fi
  printf '[%d/%d] %s... done (%ds)\n' "$STEP" "$TOTAL" "$label" $((SECONDS - start))
}

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $PY" "$PY" -m venv .venv
else
  step "checking .venv (already there)" .venv/bin/python -c "import sys; assert sys.version_info >= (3, 11), sys.version"
fi
step "updating pip" .venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch from local disk first, so nothing pulls a multi-GB CUDA build.
step "installing torch 2.13.0, CPU build (the longest step: minutes on a busy machine)" \
  .venv/bin/python -m pip install -q "torch==2.13.0"
step "installing EvoKernel TUI and its test tools" .venv/bin/python -m pip install -q -e ".[test,bench]"
# The trusted side's precompiled headers and common pybind bindings, so the first kernel after set-up
# compiles in seconds rather than a minute (once per machine; EVOKERNEL_SKIP_PREWARM=1 skips it).
if [ -z "${EVOKERNEL_SKIP_PREWARM:-}" ]; then
  step "prebuilding the verifier's shared headers and bindings (about a minute, once)" \
    .venv/bin/python -c "from verifier import VerifyConfig; from verifier.build.shared_artefacts import prewarm; r = VerifyConfig().root() / 'shared'; r.mkdir(parents=True, exist_ok=True); prewarm(r)" \
    || echo "  prebuild skipped (no C++ compiler?); the first kernel will build them instead."
fi
echo "EvoKernel TUI is installed in .venv ($(.venv/bin/evokernel --version)); the full log is $LOG."
echo "Run it with: .venv/bin/evokernel tui relu   (or first: source .venv/bin/activate, then: evokernel tui relu)"
