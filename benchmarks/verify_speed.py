"""How fast is a full verdict? Cold, changed source, unchanged source, against plain `load_inline`.

Targets: a changed kernel source -> full verdict in <= 5 s median (after the first build of a session),
isolation included, and isolation adding < 0.2 s per verdict; an unchanged source (cache hit) <= 1 s. Prints figures and ratios; writes
benchmarks/results/verify_speed.md with --write.

    python benchmarks/verify_speed.py [--task relu] [--changes 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
torch::Tensor scale_relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t n = xc.numel();
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) { const float v = in[i] * 1.0f; o[i] = v > 0.0f ? v : 0.0f; }
    return out + 0.0f * __VARIANT__;
}
"""

_ext = load_inline(name="bench_scale_relu", cpp_sources=[CPP], functions=["scale_relu"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return _ext.scale_relu(x)
'''

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
'''

PLAIN = r'''
import sys, time, torch
from torch.utils.cpp_extension import load_inline
src = sys.stdin.read()
t = time.perf_counter()
load_inline(name="plain_scale_relu", cpp_sources=[src], functions=["scale_relu"],
            extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
print(time.perf_counter() - t)
'''


def kernel(variant: int) -> str:
    # a different constant each time: a real source change that needs a rebuild, same signature
    return KERNEL.replace("return out + 0.0f * __VARIANT__;", f"return out; /* variant {variant} */")


def plain_load_inline_seconds(cpp: str) -> float:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=d)
        out = subprocess.run([sys.executable, "-c", PLAIN], input=cpp, capture_output=True, text=True, env=env,
                             check=True)
        return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--gap", type=float, default=0.0,
                        help="seconds between verdicts, for the edit a person or a model makes between them: the "
                             "previous verdict's background work (starting the next spare sandbox, ~2 s of CPU) "
                             "ends meanwhile, as it does in use; 0 for verdicts back to back")
    args = parser.parse_args()

    from verifier import VerifyConfig
    from verifier.api import verify

    lines: list[str] = []

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    cpp = kernel(0).split('CPP = r"""')[1].split('"""')[0]
    say(f"load average: {os.getloadavg()[0]:.2f} (2 cores); {args.gap:g} s between verdicts (--gap)")
    plain = plain_load_inline_seconds(cpp)
    say(f"plain load_inline (build only, fresh dir): {plain:.1f} s")

    with tempfile.TemporaryDirectory() as root:
        cfg = VerifyConfig(build_root=root, use_cache=False)
        t = time.perf_counter()
        res = verify(TASK, kernel(0), "cpu", cfg)
        cold = time.perf_counter() - t
        assert res.feasible, res.failed_gate
        say(f"cold full verdict (empty build root: PCHs + bindings + kernel + reference): {cold:.1f} s")

        changed = []
        for i in range(1, args.changes + 1):
            time.sleep(args.gap)
            t = time.perf_counter()
            res = verify(TASK, kernel(i), "cpu", cfg)
            changed.append(time.perf_counter() - t)
            assert res.feasible, res.failed_gate
            lat = res.gate("latency")
            d = lat.detail if lat is not None else {}
            claim = "no figure" if not d else (
                f"{d.get('speedup', 0):.2f}x ±{d.get('halfwidth', 0):.2f}, "
                + ("noisy" + (", stopped early (out of reach)" if d.get("out_of_reach") else "") if d.get("noisy")
                   else "a claim"))
            say(f"  changed source #{i}: {changed[-1]:.2f} s (compile {res.gate('compile').seconds:.2f} s; build "
                f"{res.phases.get('build', 0):.2f}, latency {res.phases.get('latency', 0):.2f} s in {d.get('rounds')} "
                f"rounds of {d.get('calls_per_round')} calls: {claim})")
        med_changed = statistics.median(changed)

        # The cost of isolation: changed sources verified alternately with and without the sandbox.
        iso, bare = [], []
        open_cfg = VerifyConfig(build_root=root, use_cache=False, isolate=False)
        verify(TASK, kernel(99), "cpu", open_cfg)
        for i in range(args.changes):
            for cfg_i, bucket, base in ((cfg, iso, 200), (open_cfg, bare, 300)):
                time.sleep(args.gap)
                t = time.perf_counter()
                res = verify(TASK, kernel(base + i), "cpu", cfg_i)
                bucket.append(time.perf_counter() - t)
                assert res.feasible, res.failed_gate
        added = statistics.median(iso) - statistics.median(bare)
        say(f"  isolated {statistics.median(iso):.2f} s vs unisolated {statistics.median(bare):.2f} s (medians of "
            f"{len(iso)}, alternating): isolation adds {added:+.2f} s per verdict (aim < 0.2 s)")

        rerun = []
        for _ in range(3):
            time.sleep(args.gap)
            t = time.perf_counter()
            verify(TASK, kernel(1), "cpu", cfg)
            rerun.append(time.perf_counter() - t)
        med_rerun = statistics.median(rerun)

        cached_cfg = VerifyConfig(build_root=root, use_cache=True)
        verify(TASK, kernel(1), "cpu", cached_cfg)
        hits = []
        for _ in range(5):
            t = time.perf_counter()
            res = verify(TASK, kernel(1), "cpu", cached_cfg)
            hits.append(time.perf_counter() - t)
        med_hit = statistics.median(hits)

    say("")
    say("| measure | seconds | target | vs plain load_inline |")
    say("| --- | ---: | ---: | ---: |")
    say(f"| plain `load_inline` build alone | {plain:.2f} | | 1.00× |")
    say(f"| cold full verdict | {cold:.2f} | | {plain / cold:.2f}× |")
    say(f"| changed source, full verdict (median of {len(changed)}) | {med_changed:.2f} | ≤ 5 | {plain / med_changed:.1f}× faster |")
    say(f"| unchanged source, gates re-run (build cache hit) | {med_rerun:.2f} | | {plain / med_rerun:.1f}× faster |")
    say(f"| unchanged source, verdict cache hit | {med_hit:.3f} | ≤ 1 | {plain / med_hit:.0f}× faster |")
    say(f"| added by isolation per changed-source verdict | {added:+.2f} | < 0.2 | |")
    say(f"changed-source target {'met' if med_changed <= 5 else 'NOT met'}; cache-hit target {'met' if med_hit <= 1 else 'NOT met'}")
    if args.write:
        out = ROOT / "benchmarks" / "results" / "verify_speed.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("# Verifier speed (CPU backend)\n\nCommand: `python benchmarks/verify_speed.py --write`\n"
                       f"Date: {time.strftime('%Y-%m-%d %H:%M')}\n\n```\n" + "\n".join(lines) + "\n```\n")


if __name__ == "__main__":
    main()
