"""How often an honest fp32 row sum differs from torch's beyond the verifier's fp32 tolerance (issue 38 finding).

The real verifier judged `tests/candidates/cpu/sum_rows.py` (eight float partial accumulators per row) "incorrect"
now and then, more often under load. This replays that kernel's exact order of float additions in numpy
(sequential per accumulator, then the eight summed in order: what `-O3` without `-ffast-math` must keep) on the
task's inputs (`torch.randn(4096, 4096)`, a fresh draw per call as every trial and timed call gets), against
`torch.sum(x, dim=1)`, with `verifier.correctness.compare.compare_tensor` at the task's tolerance (KernelBench's
fp32 rule: atol = rtol = 1e-4). A row whose sum lies near zero is allowed about 1e-4, while the rounding of its
partial sums (of size ~sqrt(4096)) is of the same order, so a call now and then has one such row.

    python benchmarks/sum_rows_rounding.py [--calls 200] [--double]

`--double` accumulates in double instead (rounded once at the end): the figure a kernel that wants a stable
verdict should reach.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def candidate_sum(x: np.ndarray, double: bool = False) -> np.ndarray:
    """The candidate's per-row sum: eight accumulators over column blocks of eight, then their sum in order."""
    rows, cols = x.shape
    if double:
        return x.astype(np.float64).sum(axis=1).astype(np.float32)
    acc = np.cumsum(x[:, : cols // 8 * 8].reshape(rows, -1, 8), axis=1, dtype=np.float32)[:, -1, :]
    total = np.zeros(rows, np.float32)
    for k in range(8):
        total = (total + acc[:, k]).astype(np.float32)
    for c in range(cols // 8 * 8, cols):
        total = (total + x[:, c]).astype(np.float32)
    return total


def main(argv: list[str] | None = None) -> int:
    import torch

    from verifier.correctness.compare import compare_tensor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--double", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    failed, worst = [], 0.0
    for i in range(args.calls):
        x = torch.randn(4096, 4096, generator=torch.Generator().manual_seed(1000 + i))
        want = torch.sum(x, dim=1).numpy()
        got = candidate_sum(x.numpy(), args.double)
        cmp = compare_tensor(got, want, "torch.float32", "torch.float32", None, None, "output 0")
        worst = max(worst, float((np.abs(got - want) / (1e-4 + 1e-4 * np.abs(want))).max()))
        if not cmp.ok:
            failed.append(f"seed {1000 + i}: {cmp.mismatch}")
    rate = len(failed) / args.calls
    print(f"{'double' if args.double else 'float'} accumulators: {len(failed)} of {args.calls} calls beyond the "
          f"tolerance ({rate:.1%}); worst |diff| / (atol + rtol |want|) = {worst:.2f}")
    for line in failed[:5]:
        print("  " + line)
    for checks in (12, 30, 66):
        print(f"  a verification comparing {checks} calls fails with p = {1 - (1 - rate) ** checks:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
