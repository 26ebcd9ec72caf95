"""Where a padded GPU round's jitter comes from, without the verifier (issue 33).

In one plain process on the card: rounds of 64 calls of `torch.relu` (64x4096, the KernelBench v0 size), each
call after a 128 MB L2 flush and a `torch.cuda._sleep` pad, against stub rounds with the same flushes and pads
and no call, back to back, 40 pairs per pad. Each pair's difference per call is read three ways: the host's
wall (synchronised at both ends), CUDA events around the whole round, and events around each call. If the
three agree closely here, the pad is not what makes the verifier's rounds noisy; what the verifier adds
(process handoffs, the in-window set draw) is. Also prints one pad's length in µs (the card's clock) and a
per-call event timing synchronised before each call.

`--idle-ms 0,3,30` then repeats the pairs at a pad of 250 µs with the host idle that long before each round,
as the card idles in a verification while the other side's window and the handoffs run: if the spread grows
with the gap, the card's clock coming back up from idle (a cycle-counted pad takes longer at a lower clock)
is what spreads the verifier's rounds, not the handoffs themselves (session 24's open question).

    python benchmarks/gpu_round_noise.py [--idle-ms 0,3,30]     # on a GPU machine; about 30 s
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

CALLS = 64
PAIRS = 40
PADS_US = (0, 150, 250)
CYCLES_PER_US = 2000  # as `verifier.clock.paired_calls.PAD_CYCLES_PER_US`


def main(idle_ms: list[float]) -> None:
    x = torch.randn(64, 4096, device="cuda")
    flush = torch.empty(128 * 2**20 // 4, device="cuda")

    def one_round(call: bool, pad_cycles: int, idle_s: float = 0.0) -> tuple[float, float, float]:
        whole = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        each = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(CALLS)]
        torch.cuda.synchronize()
        if idle_s:
            time.sleep(idle_s)
        t0 = time.perf_counter()
        whole[0].record()
        for start, end in each:
            flush.zero_()
            if pad_cycles:
                torch.cuda._sleep(pad_cycles)
            start.record()
            if call:
                torch.relu(x)
            end.record()
        whole[1].record()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1e3
        return wall, whole[0].elapsed_time(whole[1]), sum(a.elapsed_time(b) for a, b in each)

    def spread(v: list[float]) -> str:
        return f"med {statistics.median(v):7.2f} sd {statistics.pstdev(v):6.2f} [{min(v):7.2f},{max(v):7.2f}]"

    for pad_us in PADS_US:
        cycles = pad_us * CYCLES_PER_US
        for _ in range(3):
            one_round(True, cycles), one_round(False, cycles)
        by_wall, by_round_events, by_call_events, stub_walls, stub_events = [], [], [], [], []
        for _ in range(PAIRS):
            stub, real = one_round(False, cycles), one_round(True, cycles)
            by_wall.append((real[0] - stub[0]) / CALLS * 1e3)
            by_round_events.append((real[1] - stub[1]) / CALLS * 1e3)
            by_call_events.append((real[2] - stub[2]) / CALLS * 1e3)
            stub_walls.append(stub[0])
            stub_events.append(stub[1])
        print(f"pad {pad_us:3d}: stub wall ms {spread(stub_walls)} | stub events ms {spread(stub_events)}")
        print(f"   per call µs: wall diff {spread(by_wall)} | round-events diff {spread(by_round_events)} | "
              f"per-call events diff {spread(by_call_events)}")
    for gap in idle_ms:
        cycles = 250 * CYCLES_PER_US
        by_wall, by_round_events, stub_events = [], [], []
        for _ in range(PAIRS):
            stub, real = one_round(False, cycles, gap / 1e3), one_round(True, cycles, gap / 1e3)
            by_wall.append((real[0] - stub[0]) / CALLS * 1e3)
            by_round_events.append((real[1] - stub[1]) / CALLS * 1e3)
            stub_events.append(stub[1])
        print(f"idle {gap:g} ms before each round (pad 250): per call µs wall diff {spread(by_wall)} | "
              f"round-events diff {spread(by_round_events)} | stub events ms {spread(stub_events)}")
    pads = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.cuda._sleep(250 * CYCLES_PER_US)
        b.record()
        torch.cuda.synchronize()
        pads.append(a.elapsed_time(b) * 1e3)
    print(f"one pad of 250 µs nominal, µs: {[round(v, 1) for v in pads]}")
    synced = []
    for i in range(103):
        flush.zero_()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch.relu(x)
        b.record()
        torch.cuda.synchronize()
        if i >= 3:
            synced.append(a.elapsed_time(b) * 1e3)
    print(f"events around one call, synchronised after the flush: median {statistics.median(synced):.2f} µs "
          f"mean {statistics.mean(synced):.2f} (the host's launch path inside the window)")


if __name__ == "__main__":
    if not torch.cuda.is_available():
        raise SystemExit("gpu_round_noise.py needs a CUDA GPU; nothing measured")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle-ms", default="", help="comma-separated host idle gaps before each round, e.g. 0,3,30")
    args = ap.parse_args()
    main([float(v) for v in args.idle_ms.split(",") if v.strip()])
