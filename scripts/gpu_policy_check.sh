#!/usr/bin/env bash
# On a lent GPU (the `device` tool): issue 23's GPU evidence in one call. The level-2 library GEMM + fused
# CUDA epilogue under both presets, and the honest CUDA relu (decoy, magnitude and shape probes on CUDA).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export EVOKERNEL_BUILD_DIR=/tmp/evk-builds PYTHONUNBUFFERED=1
log="$OUT/gpu_policy${1:+_$1}.log"
{
  echo "== date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'
  v() { echo "== evokernel verify $*"; timeout 200 python3 -m evokernel_tui.cli verify "$@" --backend cuda --no-cache --json \
        | python3 -c 'import json,sys; d=json.load(sys.stdin); print("feasible", d["feasible"], "policy", d["policy"], "speedup", d["speedup"]); [print(" ", g["name"], g["status"], g["reason"][:220], {k: g["detail"][k] for k in ("library_ops", "probes") if k in g["detail"]}) for g in d["gates"]]; print("  probes", d.get("probes")); print("  notes", d["notes"][:6])'; }
  if [ "${1:-}" = decoy ]; then
    v relu tests/candidates/policy/decoy_cuda.py
  else
    v relu tests/candidates/cuda/relu.py
    v gemm_bias_relu tests/candidates/policy/library_gemm_fused_epilogue_cuda.py
    v gemm_bias_relu tests/candidates/policy/library_gemm_fused_epilogue_cuda.py --policy strict
  fi
  echo "== exit ($(date -u +%FT%TZ))"
} 2>&1 | tee "$log"
