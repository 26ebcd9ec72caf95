#!/usr/bin/env bash
# Which process holds how much of the card, every INTERVAL seconds, until killed: a diagnostic for GPU
# out-of-memory failures of the verifier (candidate sandbox, reference worker, the command line itself).
# Usage: bash scripts/gpu_mem_watch.sh OUT.txt [INTERVAL]
out=${1:?usage: gpu_mem_watch.sh OUT.txt [INTERVAL]}
interval=${2:-1}
while true; do
  {
    echo "t=$(date +%s.%N | cut -c1-14) total_used_mb=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)"
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null | while IFS=', ' read -r pid mb; do
      echo "  pid=$pid mb=$mb $(ps -o args= -p "$pid" 2>/dev/null | cut -c1-90)"
    done
  } >> "$out"
  sleep "$interval"
done
