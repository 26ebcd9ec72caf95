"""Where the decoy probe's device memory goes, step by step, on a 1 GiB ReLU (issue 33, diagnostics).

    python benchmarks/probe_memory_gpu.py [SIDE]

Prints, for each input distribution, the allocator's live and peak GiB after the draw, the scrub, the probe's
forward and the followed (flow) forward, with a torch ReLU standing in for the custom kernel: the harness's
phases come from the same calls (verifier/workers/harness.py)."""

from __future__ import annotations

import sys

import torch

from verifier.correctness.decoy import PROBE_KEY, flow_forward, probe_forward, scrub_free_cuda_memory, through
from verifier.correctness.input_recipe import draw

GIB = 2**30


def main() -> None:
    side = int(sys.argv[1]) if len(sys.argv) > 1 else 16384
    recipe = [{"kind": "randn", "shape": [side, side], "dtype": "float32"}]
    counter: dict = {"calls": 0, PROBE_KEY: None}

    def model(x):
        counter["calls"] += 1
        return through(counter, torch.relu, (x,), {})

    def mark(step: str) -> None:
        torch.cuda.synchronize()
        print(f"{step:<28} live {torch.cuda.memory_allocated() / GIB:6.2f}  peak {torch.cuda.max_memory_allocated() / GIB:6.2f}"
              f"  reserved {torch.cuda.memory_reserved() / GIB:6.2f}", flush=True)

    torch.cuda.init()
    print("problem GiB", 2 * side * side * 4 / GIB, torch.cuda.get_device_name())
    for dist in ("task", "heavy", "uniform"):
        for step_name, forward in (("probe", probe_forward), ("flow", flow_forward)):
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            inputs = draw(torch, recipe, 7, dist, "cuda")
            mark(f"{dist} {step_name}: drawn")
            scrub_free_cuda_memory(torch)
            mark(f"{dist} {step_name}: scrubbed")
            torch.cuda.reset_peak_memory_stats()
            out, found = forward(torch, model, inputs, counter)
            mark(f"{dist} {step_name}: forward")
            del out, found
            inputs = None
            mark(f"{dist} {step_name}: released")


if __name__ == "__main__":
    main()
