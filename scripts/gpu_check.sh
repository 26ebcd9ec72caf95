#!/usr/bin/env bash
# On a lent GPU machine (the `device` tool): install the wheels carried in .whl/, print the environment,
# then run what is asked: `pytest` (the GPU pytest suite), `bench ARGS...` (benchmarks/gpu_bench.py) or
# `multi ARGS...` (benchmarks/multi_gpu_bench.py: bench on 1 and N GPUs, issue 36).
# Logs go to $OUT (or ./gpu-out), each line stamped, so a run cut short still leaves what it measured.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
what=${1:-pytest}; shift || true
log="$OUT/gpu_${what}.log"
{
  echo "== date: $(date -u +%FT%TZ)  commit: $(git rev-parse --short HEAD 2>/dev/null || echo ?)"
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader 2>&1
  python3 -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU")'
  python3 -c 'from verifier.sandbox.isolation import bwrap_binary, unavailable_reason; print("bwrap", bwrap_binary(), "isolation:", unavailable_reason() or "available")' 2>&1
} | tee "$log"
case "$what" in
  pytest)
    # tests/gpu, and the files whose GPU tests live beside their CPU siblings (the speed-of-light peaks), whole
    timeout "${GPU_PYTEST_TIMEOUT:-520}" python3 -m pytest -q -rfE -p no:cacheprovider --durations=15 tests/gpu \
      $(grep -rl --include='*.py' 'mark.gpu' tests | grep -v '^tests/gpu/' | sort) "$@" 2>&1 | tee -a "$log"
    ;;
  bench)
    timeout "${GPU_BENCH_TIMEOUT:-520}" python3 benchmarks/gpu_bench.py --results "$OUT" "$@" 2>&1 | tee -a "$log"
    ;;
  multi)
    nvidia-smi -L 2>&1 | tee -a "$log"
    python3 -c 'import ray; print("ray", ray.__version__)' 2>&1 | tail -1 | tee -a "$log"
    python3 -c 'import litellm; print("litellm importable")' 2>&1 | tail -1 | tee -a "$log"
    timeout "${GPU_MULTI_TIMEOUT:-570}" python3 benchmarks/multi_gpu_bench.py --results "$OUT" "$@" 2>&1 | tee -a "$log"
    ;;
  *)
    echo "usage: scripts/gpu_check.sh pytest|bench|multi [ARGS...]" | tee -a "$log"; exit 2
    ;;
esac
echo "== exit: ${PIPESTATUS[0]}  ($(date -u +%FT%TZ))" | tee -a "$log"
