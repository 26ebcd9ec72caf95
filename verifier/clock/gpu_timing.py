"""GPU timing a GPU engineer trusts, and the evidence that catches work hidden from it.

Child side (`CudaClock`, built before any candidate code runs so it holds the real CUDA entry points):
every timed call is bracketed by CUDA events on the current stream, the L2 cache is flushed (a 256 MB
buffer zeroed) before each call, the device is synchronised around each measurement, and the flush is
queued just before the start event so launch overhead hides behind it, as `triton.testing.do_bench` does.
Then a back-to-back batch of calls is bracketed by progress marks, so the parent can compare what the
events saw with how long the device was really busy, on a clock the candidate cannot touch.

Parent side (`gpu_findings`): pure checks over the child's report and marks, no CUDA needed. The strongest
is the profiler's view: kernels on every stream, summed, against what the events on the timed stream saw.
"""

from __future__ import annotations

import time

# Zeroed before every timed call: far more than twice the L2 of an H100 or H200 (50 MB), and long enough
# on the device (~0.2-0.3 ms at 3-5 TB/s) that the host's launch of the call, Triton's Python launcher
# included, hides behind it. The parent's clock over a round then sees the device time of the calls, as
# CUDA events after a flush do, and the stub's rounds (same flush, no call) cancel the rest.
L2_FLUSH_BYTES = 1024 * 1024**2
GPU_MIN_REPS = 50
GPU_MAX_REPS = 1000
BATCH_TARGET_S = 0.02
PENDING_LIMIT_MS = 0.05
#: ...or this share of the call's own time on its stream (the events' time, or how long the stream ran on
#: after forward returned), whichever is larger: work hidden on another stream that is under 2% of the
#: work on the timed stream cannot move a figure by more than the noise the gates already allow,
#: and the wait after a long kernel is not all pending work (a 20 ms honest matmul on an H100 showed
#: 0.085-0.125 ms of device synchronise with nothing left to run, once its own stream was drained).
PENDING_SHARE = 0.02
HIDDEN_RATIO = 3.0
HIDDEN_MIN_MS = 0.005
HOST_SLACK = 1.5
PROFILE_RATIO = 2.0
_TRIVIAL_KERNELS = ("fill", "memset", "memcpy", "copy", "zero")

_perf_ns = time.perf_counter_ns


class CudaClock:
    """Event timing and unsynchronised-work probes with references taken at construction."""

    def __init__(self, torch, flush_bytes: int = L2_FLUSH_BYTES, room=None):
        """`room`: a device buffer to flush with and copy the probe's snapshots into, in place of one of its
        own (the candidate's harness passes the rounds' flush buffer, `paired_calls.flush_buffer`: a second
        1 GiB buffer, held from start to finish, was a whole gigabyte of every phase's memory; issue 33)."""
        self._torch = torch
        self._event = torch.cuda.Event
        self._record = torch.cuda.Event.record
        self._elapsed = torch.cuda.Event.elapsed_time
        self._sync = torch.cuda.synchronize
        self._current_stream = torch.cuda.current_stream
        self._stream_sync = torch.cuda.Stream.synchronize
        self._zero = torch.Tensor.zero_
        self._clone = torch.Tensor.clone
        self._equal = torch.equal
        if room is None:
            room = torch.empty(max(1, flush_bytes // 4), dtype=torch.int32, device="cuda")
        self._cache = room
        self.flush_bytes = room.numel() * room.element_size()
        room = self._cache.view(torch.uint8)
        room[:256].copy_(room[256:512])
        if room.numel() >= 12288:  # the sampled snapshot's strided copy kernel, loaded now as well
            room[8192:12288].view(4, 1024).copy_(room[:8192].view(8, 1024)[1::2])
        torch.cuda.synchronize()

    def flush(self) -> None:
        """Evict the L2 cache by writing a buffer larger than it (queued on the current stream)."""
        self._zero(self._cache)

    def probe(self, outputs: list) -> dict:
        """Right after forward returns: is the output complete as seen from the current stream?

        A copy queued on the current stream sees only work ordered before it; if it differs from the
        output after a full device synchronise, or the device is still busy once the current stream is
        drained, forward returned before its work was done.
        """
        t0 = _perf_ns()
        snaps = self._snapshot(outputs)
        self._stream_sync(self._current_stream())
        drain_ms = (_perf_ns() - t0) / 1e6  # how long forward's own stream still ran after it returned
        t0 = _perf_ns()
        self._sync()
        pending_ms = (_perf_ns() - t0) / 1e6
        t0 = _perf_ns()
        self._sync()  # the same call on an idle device: what a synchronise costs with nothing pending
        idle_ms = (_perf_ns() - t0) / 1e6
        changed = any(not _bitwise_equal(self._torch, self._equal, snap, pick(o))
                      for (snap, pick), o in zip(snaps, outputs, strict=True))
        return {"pending_ms": pending_ms, "idle_ms": idle_ms, "drain_ms": drain_ms, "changed": changed}

    def _snapshot(self, outputs: list) -> list:
        """(copy, pick) per output: `pick(output)` is the part copied, queued on the current stream into the
        flush buffer when it fits: a fresh allocation could reach cudaMalloc, which waits for the whole
        device and would hide the race (so could the lazy loading of the copy kernel: __init__ launches it
        once). An output larger than the room left is sampled: every `step`-th chunk of SAMPLE_CHUNK bytes
        from an offset drawn per call, as many as fit (a 6.4 GB output's full copy and comparison took
        13 GB beside the candidate's call and ran an H100 out of memory); the host's check that the device
        is idle once forward's stream drained covers the rest."""
        import secrets

        torch = self._torch
        room = self._cache.view(torch.uint8)
        snaps, used = [], 0
        for o in outputs:
            nbytes = o.numel() * o.element_size()
            if not o.is_contiguous() or o.dim() == 0:
                snaps.append((self._clone(o), _whole))
                continue
            if used + nbytes > room.numel():
                chunks, fit = nbytes // SAMPLE_CHUNK, (room.numel() - used) // SAMPLE_CHUNK
                if chunks < 1 or fit < 1:
                    snaps.append((self._clone(o), _whole))
                    continue
                step = -(-chunks // fit)
                pick = _sampler(torch, secrets.randbelow(step), step, min(fit, -(-chunks // step)))
                part = pick(o)
                dst = room[used:used + part.numel()].view(part.shape)
                dst.copy_(part)
                snaps.append((dst, pick))
                used += (part.numel() + 255) // 256 * 256
                continue
            dst = room[used:used + nbytes]
            dst.copy_(o.view(torch.uint8).reshape(-1))
            snaps.append((dst.view(o.dtype).view(o.shape), _whole))
            used += (nbytes + 255) // 256 * 256
        return snaps

    def time_calls(self, fn, args, warmup: int, min_reps: int, max_reps: int, min_time_s: float, progress) -> dict:
        """Per-call event milliseconds (L2 flushed, device synchronised) and a marked back-to-back batch."""
        for _ in range(max(1, warmup)):
            fn(*args)
        self._sync()
        times: list[float] = []
        host: list[float] = []
        budget_end = _perf_ns() + int(min_time_s * 1e9)
        while len(times) < max_reps and (len(times) < min_reps or _perf_ns() < budget_end):
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            self._sync()
            self.flush()
            self._record(start)
            t0 = _perf_ns()
            fn(*args)
            host.append((_perf_ns() - t0) / 1e6)
            self._record(end)
            self._sync()
            times.append(self._elapsed(start, end))
        per_call = max(sorted(times)[len(times) // 2], sorted(host)[len(host) // 2], 1e-4)
        n = int(min(5000, max(20, BATCH_TARGET_S * 1000.0 / per_call)))
        self._sync()
        progress.mark("gpu_batch_start", calls=n)
        t0 = _perf_ns()
        for _ in range(n):
            fn(*args)
        self._sync()
        batch_ms = (_perf_ns() - t0) / 1e6
        progress.mark("gpu_batch_end", calls=n)
        return {"times_ms": times, "host_ms": host, "batch_calls": n, "batch_ms": batch_ms,
                "l2_flush_bytes": self.flush_bytes, "timer": "cuda-events"}


SAMPLE_CHUNK = 1 << 20  # bytes: the unit an output too large for the flush buffer is sampled in
EQUAL_BLOCK = 1 << 28  # bytes compared at once: `torch.equal` of a whole output makes a result as large


def _whole(o):
    return o


def _sampler(torch, start: int, step: int, count: int):
    """Chunks start, start + step, ... (`count` of them) of a contiguous tensor's bytes, as one strided view."""
    def pick(o):
        raw = o.reshape(-1).view(torch.uint8)
        rows = raw[:raw.numel() // SAMPLE_CHUNK * SAMPLE_CHUNK].view(-1, SAMPLE_CHUNK)
        return rows[start::step][:count]
    return pick


def _bitwise_equal(torch, equal, a, b) -> bool:
    """Bit-for-bit equality (NaN-safe): compare the raw bytes, a block at a time."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    a, b = a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
    return all(bool(equal(a[i:i + EQUAL_BLOCK], b[i:i + EQUAL_BLOCK])) for i in range(0, a.numel(), EQUAL_BLOCK))


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return (s[n // 2] + s[(n - 1) // 2]) / 2.0 if n else 0.0


def _batch_window_ms(marks: list) -> tuple[float, int] | None:
    """Wall milliseconds between the batch marks, on the parent's clock, and the number of calls."""
    start = end = None
    calls = 0
    for t, m in marks:
        if not isinstance(m, dict):
            continue
        if m.get("phase") == "gpu_batch_start":
            start, calls = t, int(m.get("calls", 0) or 0)
        elif m.get("phase") == "gpu_batch_end":
            end = t
    if start is None or end is None or calls <= 0 or end < start:
        return None
    return (end - start) * 1000.0, calls


def device_kernels(profile: list[dict]) -> dict[str, float]:
    """Device kernels (not aten ops, not runtime calls) with their self milliseconds."""
    return {r["name"]: float(r.get("self_ms", 0.0)) for r in profile or []
            if r.get("device_kernel") and not r["name"].startswith("aten::")}


def vendor_kernels(candidate_profile: list[dict], reference_profile: list[dict], share: float = 0.10) -> list[str]:
    """Kernels that did at least `share` of the reference's device time and also ran in the candidate."""
    ref = device_kernels(reference_profile)
    total = sum(ref.values()) or 1.0
    dominant = {k for k, v in ref.items() if v / total >= share and not any(t in k.lower() for t in _TRIVIAL_KERNELS)}
    return sorted(dominant & set(device_kernels(candidate_profile)))


def pending_limit_ms(event_ms: float) -> float:
    """How long the device may stay busy after forward's stream is drained before it counts as hidden work."""
    return max(PENDING_LIMIT_MS, PENDING_SHARE * max(0.0, event_ms))


def gpu_findings(cand: dict, ref: dict, marks: list) -> list[tuple[str, str]]:
    """(rule, message) for each sign that the candidate's GPU work escaped the timed stream."""
    found: list[tuple[str, str]] = []
    probes = cand.get("gpu_probes") or []
    changed = sum(1 for p in probes if p.get("changed"))
    if changed:
        found.append(("unsynchronised-work",
                      f"in {changed} of {len(probes)} trials the output was not finished on the current stream when "
                      "forward returned: launch on the current stream (at::cuda::getCurrentCUDAStream()) and never "
                      "on a stream of your own"))
    pending = [max(0.0, float(p.get("pending_ms", 0.0)) - float(p.get("idle_ms", 0.0))) for p in probes]
    times, host = cand.get("times_ms") or [], cand.get("host_ms") or []
    drained = [float(p.get("drain_ms", 0.0)) for p in probes]
    limit = pending_limit_ms(max(_median(times) if times else 0.0, _median(drained) if drained else 0.0))
    if pending and _median(pending) > limit and not changed:
        found.append(("unsynchronised-work",
                      f"the GPU was still busy {_median(pending):.3f} ms after forward's stream was drained (more "
                      f"than {limit:.3f} ms): work ran on another stream"))
    device_ms = cand.get("profile_device_ms")
    if times and device_ms is not None and device_ms > PROFILE_RATIO * _median(times) + HIDDEN_MIN_MS:
        found.append(("unsynchronised-work",
                      f"the profiler saw {device_ms:.4f} ms of GPU kernels per forward but CUDA events on the current "
                      f"stream saw {_median(times):.4f} ms: the work runs outside the timed stream"))
    window = _batch_window_ms(marks)
    if times and window is not None:
        wall_ms, calls = window
        per_call = wall_ms / calls
        event_ms, host_ms = _median(times), _median(host)
        if (per_call > HIDDEN_RATIO * event_ms and per_call > HOST_SLACK * host_ms
                and per_call - event_ms > HIDDEN_MIN_MS):
            found.append(("unsynchronised-work",
                          f"CUDA events on the current stream saw {event_ms:.4f} ms per call but the device was busy "
                          f"{per_call:.4f} ms per call: the work is hidden from the timed stream"))
    vendor = vendor_kernels(cand.get("profile") or [], ref.get("profile") or [])
    if vendor:
        found.append(("vendor-kernel", f"{vendor[0][:120]} (the reference's library kernel) ran in forward: "
                                       "write the kernel instead of calling cuBLAS/cuDNN"))
    return found
