"""Where a GPU timing round's time goes, in one process: the same sets drawn from seeds, timed with the
real model (a replay) and with the stub's ready outputs, alternating, as the reference worker does.
A diagnostic for the attested clock on huge problems (the 6.4 GB ReLU's stub cost more than its real
round: every round unresolved). Usage: python benchmarks/gpu_round_overhead.py TASK.py [--rounds N]."""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import torch

    from verifier.clock.paired_calls import draw_sets, ready_model, time_round
    from verifier.correctness.input_recipe import capture

    ap = argparse.ArgumentParser()
    ap.add_argument("task")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--count", type=int, default=1)
    args = ap.parse_args()
    mod = types.ModuleType("task")
    exec(compile(Path(args.task).read_text(), args.task, "exec"), mod.__dict__)
    recipe = capture(torch, mod.get_inputs)
    model = mod.Model(*mod.get_init_inputs()).cuda().eval()
    rows = []

    def clocked(fn, *a, **k):
        torch.cuda.synchronize()
        before = torch.cuda.memory_stats()
        t0 = time.perf_counter()
        out = fn(*a, **k)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        after = torch.cuda.memory_stats()
        return out, wall, {k: after.get(k, 0) - before.get(k, 0) for k in ("num_alloc_retries", "num_device_alloc",
                                                                           "num_device_free")}

    seed = 1
    with torch.no_grad():
        for r in range(args.rounds):
            seeds = list(range(seed, seed + args.count))
            seed += args.count
            def sets(seeds=seeds):
                return draw_sets(torch, recipe, seeds, "cuda")

            def timed(m, detach, sets=sets):
                return time_round(torch, m, sets(), "cuda", detach_inputs=detach)

            (times, kept), wall_round, st = clocked(timed, model, False)
            _, wall_replay, st2 = clocked(timed, model, True)
            _, wall_stub, st3 = clocked(timed, ready_model(kept), True)
            _, wall_draw, _ = clocked(sets)
            rows.append({"round": r, "events_ms": times, "round_ms": wall_round, "replay_ms": wall_replay,
                         "stub_ms": wall_stub, "draw_ms": wall_draw, "replay_alloc": st2, "stub_alloc": st3,
                         "round_alloc": st})
            del kept
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
