"""What both sides of a paired measurement do the same way: load input sets, call, time, save.

The trusted reference worker and the sandboxed candidate harness run exactly this code, with the same
thread count, so a speedup compares like with like. Inputs travel as `.npy` files plus a small
`args.json` (never pickle); a non-tensor argument travels as its JSON value.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from verifier.clock.gpu_timing import L2_FLUSH_BYTES
from verifier.correctness.input_recipe import draw_round as _draw_round

if TYPE_CHECKING:
    from verifier.config import VerifyConfig

_perf_ns = time.perf_counter_ns
# CUDA entry points taken when this module is imported (before any candidate code runs in the harness),
# and the L2 flush buffer; a dict filled in place, so the harness's identity snapshot of this module
# stays the same.
_CUDA: dict = {}
HIDDEN_RATIO = 1.25  # host-seen time beyond the events' by this factor (plus HIDDEN_SLACK_MS): work off the stream
HIDDEN_SLACK_MS = 0.015


def set_flush_bytes(nbytes: int | None) -> None:
    """The size of the L2 flush queued before every timed GPU call (default `L2_FLUSH_BYTES`, 1 GiB): set by
    the trusted side for both processes of a verification from `l2_flush_bytes` (`flush_bytes_of`), before
    any candidate code runs, so the two sides flush alike. Smaller flushes cost a round less overhead
    (µs kernels); the flush must still be long enough to hide a call's launch."""
    if nbytes:
        _CUDA["flush_bytes"] = max(1 << 20, int(nbytes))
        _CUDA.pop("flush", None)


GPU_LOOPS = ("sync", "async")


def set_gpu_loop(mode: str | None) -> None:
    """How a GPU round loop runs (`gpu_loop_of`), set by the trusted side for both processes of a
    verification before any candidate code runs, as the flush size is: "sync" (a device synchronise around
    every call, `_time_round_cuda`) or "async" (`_time_round_cuda_async`)."""
    _CUDA["loop"] = mode if mode in GPU_LOOPS else "sync"


#: the nominal SM clock a pad's microseconds are turned into cycles at: both sides spin the same number of
#: cycles on the same card, so their pads last alike whatever the clock runs at
PAD_CYCLES_PER_US = 2000


def set_gpu_pad(cycles: int | None) -> None:
    """A spin of `cycles` GPU clock cycles queued before each timed call's flush in the async loop (both
    sides, set by the trusted side before any candidate code runs, as the flush size is). Why: in the async
    loop a call of a few µs is host-bound (refill, keep, flush, events and the call's own launch cost the
    host 40-80 µs a call against 5 µs of kernel), so a round measured the host's launch path, not the card
    (ReLU v0 read 26 µs for the reference where its events see 4.4). With each call's device work padded
    past the host's, the queue never drains, the round is bound by the card, and the stub round, padded
    alike, takes the pad off again. A spin (one thread counting its clock) repeats far more closely than a
    bandwidth-bound flush of the same length, so the pad adds little noise. 0 or None: no pad."""
    _CUDA["pad_cycles"] = max(0, int(cycles or 0))


def gpu_pad_cycles_of(config: VerifyConfig) -> int:
    """A verification's pad (`set_gpu_pad`) in cycles: `VerifyConfig.gpu_pad_us`, else `EVOKERNEL_GPU_PAD_US`,
    else 0, at `PAD_CYCLES_PER_US`."""
    us = config.gpu_pad_us if config.gpu_pad_us is not None else os.environ.get("EVOKERNEL_GPU_PAD_US")
    try:
        return max(0, int(float(us) * PAD_CYCLES_PER_US)) if us else 0
    except ValueError:
        return 0


def gpu_round_fields(config: VerifyConfig, default_flush_bytes: int | None = None) -> dict:
    """The GPU round settings the trusted side sends both processes of a verification (the harness's job, the
    reference worker's `prepare`): the flush size (`default_flush_bytes` where none was chosen), the loop and
    the pad. `apply_gpu_round_fields` is their other end."""
    return {"l2_flush_bytes": flush_bytes_of(config) or default_flush_bytes, "gpu_loop": gpu_loop_of(config),
            "gpu_pad_cycles": gpu_pad_cycles_of(config)}


def apply_gpu_round_fields(fields: dict) -> None:
    """`gpu_round_fields` set in this process (`set_flush_bytes`, `set_gpu_loop`, `set_gpu_pad`), before any
    candidate code runs: both sides of the clock flush, loop and pad alike."""
    set_flush_bytes(fields.get("l2_flush_bytes") or L2_FLUSH_BYTES)
    set_gpu_loop(fields.get("gpu_loop"))
    set_gpu_pad(fields.get("gpu_pad_cycles"))


def gpu_loop_of(config: VerifyConfig) -> str:
    """A verification's GPU loop: `VerifyConfig.gpu_loop`, else `EVOKERNEL_GPU_LOOP`, else "sync"
    (issue 33: "async" is to be measured on a GPU against KernelBench-style timing before it is the default)."""
    mode = str(config.gpu_loop or os.environ.get("EVOKERNEL_GPU_LOOP") or "sync")
    return mode if mode in GPU_LOOPS else "sync"


def flush_bytes_of(config: VerifyConfig) -> int | None:
    """A verification's flush size: `VerifyConfig.l2_flush_mb`, else `EVOKERNEL_L2_FLUSH_MB` (the
    person's environment, for measuring), else None (the default)."""
    mb = config.l2_flush_mb or os.environ.get("EVOKERNEL_L2_FLUSH_MB")
    try:
        return int(float(mb) * 1024**2) if mb else None
    except ValueError:
        return None


# glibc's mallopt parameters (malloc.h) and its defaults where the environment sets nothing
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_MMAP_MAX, _DEFAULT_TRIM_THRESHOLD = 65536, 128 * 1024
_LIBC: dict = {}  # the C library's handle, filled in place (the harness's identity snapshot of this module)


def _libc():
    if "lib" not in _LIBC:
        import ctypes

        try:
            lib = ctypes.CDLL(None)
            _LIBC["lib"] = lib if hasattr(lib, "mallopt") and hasattr(lib, "malloc_trim") else None
        except OSError:
            _LIBC["lib"] = None
    return _LIBC["lib"]


def steady_heap(device: str) -> bool:
    """On the CPU, the allocator settings under which a timed round's allocations cost least, set by the
    trusted code of both processes before every round (`draw_sets`, `load_sets`, `time_round`): no block
    is mmapped (`M_MMAP_MAX` 0) and the heap is never trimmed (`M_TRIM_THRESHOLD` the largest), so a
    round's sets and outputs reuse pages the previous round faulted in. Before (issue 37) one
    `mallopt(M_MMAP_MAX, 0)` line in a candidate's module gave its 32 MiB outputs reused heap pages while
    the reference's were mmapped and faulted in afresh every call: an honest relu with that line read
    2-6x the same kernel without it. With both sides at the cheapest setting, nothing a candidate sets
    in its own allocator makes its calls cheaper than the reference's. The reference worker goes back to
    `default_heap` before the next verification. False where there is no glibc `mallopt` (nothing set)."""
    if device != "cpu":
        return False
    lib = _libc()
    if lib is None:
        return False
    lib.mallopt(_M_MMAP_MAX, 0)
    lib.mallopt(_M_TRIM_THRESHOLD, -1)  # (size_t)-1: never trim
    return True


def default_heap() -> None:
    """The process's allocator back as the environment set it (`CpuBackend.child_env`), and the free heap
    given back to the system (`malloc_trim`): the long-lived reference worker after its timed rounds."""
    lib = _libc()
    if lib is None:
        return

    def env_int(name: str, default: int) -> int:
        try:
            return int(os.environ.get(name, default))
        except ValueError:
            return default

    lib.mallopt(_M_MMAP_MAX, env_int("MALLOC_MMAP_MAX_", _DEFAULT_MMAP_MAX))
    lib.mallopt(_M_TRIM_THRESHOLD, min(env_int("MALLOC_TRIM_THRESHOLD_", _DEFAULT_TRIM_THRESHOLD), (1 << 31) - 1))
    lib.malloc_trim(0)


def dtype_name(torch, dtype) -> str:
    return str(dtype).replace("torch.", "")


def save_tensor(torch, np, path: Path, t) -> dict:
    """One tensor as .npy (float16/bfloat16 widened to float32, the dtype kept in the record)."""
    t = t.detach()
    meta = {"shape": list(t.shape), "dtype": dtype_name(torch, t.dtype), "device": str(t.device), "file": path.name}
    arr = t.to("cpu")
    if arr.dtype in (torch.bfloat16, torch.float16):
        arr = arr.float()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as fh:
        np.save(fh, arr.contiguous().numpy(), allow_pickle=False)
    return meta


def save_blocks(torch, np, directory: Path, kept: list, blocks: dict, tag: str = "b") -> dict:
    """Slices of a round's kept outputs: `blocks` maps a call index to [output index, start, length] triples
    over the flattened output; each is written as `s{k}_out{j}_{tag}{b}.npy` (`tag`: one check's own
    names, so two candidates checked against one reference round do not collide). Returns {call: [records]}."""
    if not tag.isalnum():
        raise ValueError(f"bad block tag {tag!r}")
    saved: dict[str, list] = {}
    for key, entries in blocks.items():
        k = int(key)
        outs = kept[k] if 0 <= k < len(kept) else []
        records = []
        for b, (j, start, length) in enumerate(entries):
            flat = outs[int(j)].reshape(-1)
            records.append(save_tensor(torch, np, directory / f"s{k}_out{int(j)}_{tag}{b}.npy",
                                       flat[int(start):int(start) + int(length)]))
        saved[str(k)] = records
    return saved


def npy_digest(torch, np, t) -> str:
    """SHA-256 of the exact bytes `save_tensor` would write for `t`: lets the trusted side check
    "unchanged" against a file the candidate wrote without keeping a copy of its own."""
    import hashlib
    import io

    t = t.detach()
    arr = t.to("cpu")
    if arr.dtype in (torch.bfloat16, torch.float16):
        arr = arr.float()
    a = arr.contiguous().numpy()
    # np.save's own header, then the C-ordered bytes hashed in place: the same bytes as the file, without
    # streaming them through np.save's buffered copies (a fifth of the digest's time at 256 MB)
    head = io.BytesIO()
    try:
        np.lib.format.write_array_header_1_0(head, np.lib.format.header_data_from_array_1_0(a))
    except ValueError:  # a header too long for version 1.0 (never for a plain shape): np.save's own stream
        h = hashlib.sha256()

        class _Hashing(io.RawIOBase):
            def writable(self) -> bool:
                return True

            def write(self, b) -> int:
                h.update(b)
                return len(b)

        np.save(_Hashing(), a, allow_pickle=False)
        return h.hexdigest()
    h = hashlib.sha256(head.getvalue())
    if a.size:
        h.update(memoryview(a.reshape(-1).view(np.uint8)))
    return h.hexdigest()


def load_tensor(torch, np, directory: Path, meta: dict, device: str, mmap: bool = False):
    """One argument from its .npy file. `mmap`: mapped copy-on-write instead of read (a timed round's sets,
    which `refill` copies into the persistent buffers anyway: one pass over the data instead of two)."""
    name = meta["file"]
    if "/" in name or name.startswith("."):
        raise ValueError(f"bad tensor file name {name!r}")
    arr = np.load(directory / name, allow_pickle=False, mmap_mode="c" if mmap else None)
    t = torch.from_numpy(arr).to(getattr(torch, meta["dtype"]))
    return t.to(device) if device != "cpu" else t


def save_args(torch, np, directory: Path, args: list, prefix: str = "in") -> list[dict]:
    """Write one call's arguments; returns their records (also written as `<prefix>.json`)."""
    records = []
    for j, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            records.append({"tensor": save_tensor(torch, np, directory / f"{prefix}{j}.npy", a)})
        else:
            json.dumps(a)
            records.append({"value": a})
    (directory / f"{prefix}.json").write_text(json.dumps(records))
    return records


def load_args(torch, np, directory: Path, device: str, prefix: str = "in", mmap: bool = False) -> list:
    records = json.loads((directory / f"{prefix}.json").read_text())
    return [load_tensor(torch, np, directory, r["tensor"], device, mmap) if "tensor" in r else r.get("value")
            for r in records]


def refill(torch, persistent: list | None, fresh: list) -> list:
    """New content in the same buffers when shapes and dtypes allow (pointer caches see the same
    address with different data), else the fresh tensors themselves."""
    if persistent is None or len(persistent) != len(fresh):
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in fresh]
    same = all(
        (not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor))
        or (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
            and a.device == b.device)
        for a, b in zip(persistent, fresh, strict=True)
    )
    if not same:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in fresh]
    out = []
    for a, b in zip(persistent, fresh, strict=True):
        if isinstance(a, torch.Tensor):
            a.copy_(b)
            out.append(a)
        else:
            out.append(b)
    return out


def plain_outputs(torch, out) -> list:
    """Exactly `torch.Tensor`s with real, strided storage: subclasses, `__torch_function__` tricks, meta
    or lazy tensors are refused (their value would be decided when the harness reads them)."""
    items = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (tuple, list)) else None
    if not items:
        raise TypeError(f"forward returned {type(out).__name__}; it must return a tensor or a tuple of tensors")
    for o in items:
        if type(o) is not torch.Tensor:
            raise TypeError(f"forward returned a {type(o).__module__}.{type(o).__name__}; "
                            "outputs must be plain torch.Tensor objects, not subclasses")
        if o.is_meta or o.layout != torch.strided or o.device.type not in ("cpu", "cuda"):
            raise TypeError("forward returned a tensor without real strided storage")
        o.untyped_storage()
    return items


def sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def scramble(torch, persistent: list | None) -> None:
    """Overwrite every element of the input buffers (NaN, or every bit flipped): done before the last
    call's outputs are copied, so an output that is a view of its input shows it."""
    for a in persistent or []:
        if not isinstance(a, torch.Tensor) or a.numel() == 0:
            continue
        if a.is_floating_point() or a.is_complex():
            a.fill_(float("nan"))
        elif a.dtype == torch.bool:
            a.logical_not_()
        else:
            a.bitwise_not_()


def _keep(torch, outs: list) -> list:
    return [o.detach().clone() for o in outs]


def time_round(torch, model, sets: list[list], device: str, keep_outputs: bool = True,
               detach_inputs: bool = True, by_reference: bool = False) -> tuple[list[float], list]:
    """One timed call per input set, each on fresh content refilled outside the timed region; returns
    per-call milliseconds and (cloned, outside the timer) outputs for the sampled checks. On CUDA each
    call is timed by events with the L2 cache flushed first (`_time_round_cuda`).

    `detach_inputs` (the candidate's side): a call's outputs are copied only after its input buffers
    were overwritten (by the next set's content, or scrambled after the last call), so an output that
    aliases its input (a strided view, memory mapped twice) shows other data and fails the sampled
    check, while a real output cannot tell the difference. The trusted reference passes False.

    `by_reference` (CPU rounds whose outputs the parent reads from the paused process): the outputs are
    kept as returned, not copied; an output that is a view of its input, or a buffer the kernel hands
    back again on a later call, then shows the later content when read and fails the check, and the
    clocked window holds no copy per call."""
    if device == "cuda":
        if _CUDA.get("loop") == "async":
            return _time_round_cuda_async(torch, model, sets, keep_outputs, detach_inputs)
        return _time_round_cuda(torch, model, sets, keep_outputs, detach_inputs)
    steady_heap(device)

    def timed_call(args: list):
        sync(torch, device)
        t0 = _perf_ns()
        out = model(*args)
        sync(torch, device)
        return out, (_perf_ns() - t0) / 1e6

    return _timed_calls(torch, sets, timed_call, keep_outputs, detach_inputs, by_reference)


def _timed_calls(torch, sets: list[list], timed_call, keep_outputs: bool, detach_inputs: bool,
                 by_reference: bool = False, adopt_first: bool = False) -> tuple[list[float], list]:
    """The round loop both devices share: refill the persistent buffers with each set's content, make
    one `timed_call(args) -> (outputs, ms)`, and keep outputs as `time_round` describes.

    `adopt_first` (the GPU's sets, drawn on the card for this round only): the first set's tensors become
    the persistent buffers instead of a copy of them, so a gigabyte problem holds one set less on the card
    and its round copies one set less. Not for the CPU's sets, which may be read-only file mappings."""
    times: list[float] = []
    kept: list = []
    persistent = None
    pending = None  # the previous call's outputs, copied once its inputs have been overwritten
    for fresh in sets:
        persistent = list(fresh) if persistent is None and adopt_first else refill(torch, persistent, fresh)
        if pending is not None:
            kept.append(_keep(torch, pending))
            pending = None
        out, ms = timed_call(persistent)
        times.append(ms)
        if keep_outputs and by_reference and detach_inputs:  # an in-place task's outputs are its inputs: copied
            kept.append(plain_outputs(torch, out))
        elif keep_outputs:
            pending = plain_outputs(torch, out)
            if not detach_inputs:
                kept.append(_keep(torch, pending))
                pending = None
        del out
    if pending is not None:
        scramble(torch, persistent)
        kept.append(_keep(torch, pending))
    elif by_reference and detach_inputs:
        scramble(torch, persistent)  # a view of the last call's inputs shows it when read
    return times, kept


def _take_cuda_refs(torch) -> None:
    if "event" not in _CUDA:
        _CUDA.update(event=torch.cuda.Event, record=torch.cuda.Event.record, elapsed=torch.cuda.Event.elapsed_time,
                     sync=torch.cuda.synchronize, zero=torch.Tensor.zero_, spin=torch.cuda._sleep)


def _cuda_refs(torch) -> dict:
    """The CUDA entry points (taken once, as early as possible) and a 256 MB buffer to flush the L2."""
    _take_cuda_refs(torch)
    if "flush" not in _CUDA:
        _CUDA["flush"] = torch.empty(max(1, int(_CUDA.get("flush_bytes", L2_FLUSH_BYTES)) // 4), dtype=torch.int32,
                                     device="cuda")
    return _CUDA


def flush_buffer(torch):
    """The L2 flush buffer of this process's timed rounds (made now if it is not yet, at the size
    `set_flush_bytes` chose): the candidate's harness lends it to its `CudaClock` as the probe's room."""
    return _cuda_refs(torch)["flush"]


def cuda_call_ms(event_ms: float, host_ms: float, empty_ms: float) -> float:
    """One call's time: the CUDA events' (as `triton.testing.do_bench` reads it) unless the host saw the
    device busy clearly longer than the events on the current stream did, i.e. work was queued on
    another stream: then the host's figure, less what an empty call costs it."""
    seen = max(0.0, host_ms - empty_ms)
    return seen if seen > HIDDEN_RATIO * event_ms + HIDDEN_SLACK_MS else event_ms


def _time_round_cuda(torch, model, sets: list[list], keep_outputs: bool,
                     detach_inputs: bool = True) -> tuple[list[float], list]:
    """As `time_round`, timed as `do_bench` does: the L2 flush is queued first (the launch overhead hides
    behind it), then events around the call on the current stream, then a device synchronise. The host's
    clock around the same span, less an empty call's, catches work the events cannot see."""
    c = _cuda_refs(torch)
    event, record, elapsed, sync, zero, flush = c["event"], c["record"], c["elapsed"], c["sync"], c["zero"], c["flush"]
    empty = []
    for _ in range(3):
        start, end = event(enable_timing=True), event(enable_timing=True)
        sync()
        zero(flush)
        t0 = _perf_ns()
        record(start)
        record(end)
        sync()
        empty.append((_perf_ns() - t0) / 1e6)
    empty_ms = min(empty)

    calls: list[list[float]] = []  # per call: [host ms from before the call to after its sync, ms to launch]

    def timed_call(args: list):
        start, end = event(enable_timing=True), event(enable_timing=True)
        sync()
        zero(flush)
        t0 = _perf_ns()
        record(start)
        out = model(*args)
        record(end)
        t1 = _perf_ns()
        sync()
        host_ms = (_perf_ns() - t0) / 1e6
        calls.append([round(host_ms, 4), round((t1 - t0) / 1e6, 4)])
        return out, cuda_call_ms(float(elapsed(start, end)), host_ms, empty_ms)

    t_loop = _perf_ns()
    times, kept = _timed_calls(torch, sets, timed_call, keep_outputs, detach_inputs, adopt_first=True)
    t_tail = _perf_ns()
    # the round's own tail (the inputs scrambled, the last outputs copied) finished inside its window: left
    # queued, it ran in the next command's window instead (a replay's tail in the stub's), and on a 6.4 GB
    # ReLU the stub then cost as much as the real round (every round "unresolved", no figure)
    sync()
    _CUDA["last_loop"] = {"calls_ms": calls[:16], "empty_ms": round(empty_ms, 4),
                          "loop_ms": round((t_tail - t_loop) / 1e6, 4), "tail_ms": round((_perf_ns() - t_tail) / 1e6, 4)}
    return times, kept


def _time_round_cuda_async(torch, model, sets: list[list], keep_outputs: bool,
                           detach_inputs: bool = True) -> tuple[list[float], list]:
    """As `_time_round_cuda` with no synchronise between calls: each call's L2 flush, events, call and output
    copy are queued on the stream and the host goes on to the next; one device synchronise ends the round.

    Why: around a kernel of a few µs the per-call synchronise is most of a round, and its host-side jitter
    (a thread woken, a core's idle state) swamps the kernel: every round of ReLU v0 came out "unresolved"
    with a 64-call round of 20 ms around 0.3 ms of kernel. Queued, the round is bound by the card's own work
    (flush, call, copy), which repeats closely, and the stub subtracts the same queued work without the call.
    What the attested clock rests on is unchanged: the parent's clock around the whole round; work left on
    another stream is inside it (the final synchronise is device-wide). The events' per-call times are read
    after that synchronise and stay diagnostics."""
    c = _cuda_refs(torch)
    event, record, elapsed, sync, zero, flush = c["event"], c["record"], c["elapsed"], c["sync"], c["zero"], c["flush"]
    spin, pad = c["spin"], int(c.get("pad_cycles", 0))
    sync()
    pairs: list = []

    def timed_call(args: list):
        start, end = event(enable_timing=True), event(enable_timing=True)
        if pad:
            spin(pad)
        zero(flush)
        record(start)
        out = model(*args)
        record(end)
        pairs.append((start, end))
        return out, 0.0

    t_loop = _perf_ns()
    times, kept = _timed_calls(torch, sets, timed_call, keep_outputs, detach_inputs, adopt_first=True)
    t_tail = _perf_ns()
    sync()
    times = [float(elapsed(start, end)) for start, end in pairs]
    _CUDA["last_loop"] = {"mode": "async", "pad_cycles": pad, "calls_ms": [], "empty_ms": 0.0,
                          "loop_ms": round((t_tail - t_loop) / 1e6, 4), "tail_ms": round((_perf_ns() - t_tail) / 1e6, 4)}
    return times, kept


def last_loop_detail() -> dict | None:
    """Where the last GPU round loop's time went by this process's own clock (diagnostics only, a worker's
    claim): each call's host span (from before the call to after its synchronise) and launch time, an
    empty call's span, the loop and its tail."""
    return _CUDA.pop("last_loop", None)


def ready_model(outputs: list):
    """The stub round's model (both sides' `stub_round`): each call returns the next of `outputs`, outputs
    that already exist (cycled when there are fewer than calls), so a stub round costs everything of a
    timed round but the calls themselves."""
    pending = list(outputs)
    state = {"k": 0}

    def call(*_args):
        if not pending:
            raise RuntimeError("the stub round has no ready outputs")
        out = pending[state["k"] % len(pending)]
        state["k"] += 1
        return out

    return call


def load_sets(torch, np, directory: Path, count: int, device: str) -> list[list]:
    """A timed round's input sets (mapped on the CPU: `refill` copies them into the persistent buffers)."""
    steady_heap(device)
    return [load_args(torch, np, directory, device, prefix=f"s{k}_in", mmap=device == "cpu") for k in range(count)]


def draw_sets(torch, recipe: list[dict], seeds: list, device: str, dist: str = "task") -> list[list]:
    """A round's input sets drawn on `device` from the seeds the parent revealed with the command
    (`verifier.correctness.input_recipe.draw_round`): what `load_sets` reads from files, for a task with a recipe. Both
    sides of the clock (the harness's round, the reference worker's replay and stub) call this."""
    steady_heap(device)
    return _draw_round(torch, recipe, list(seeds), dist, device)


WAKE_SPIN_PADS = 8  # a padded round's wake spins this many pads (1.2 ms at 150 µs) before its window opens


def wake(torch, device: str) -> None:
    """The `wake` command both workers answer just before a clocked window (`wake_enabled`): one tiny
    kernel and a synchronise on the GPU, so the process's thread and its CUDA context are running when the
    window opens. The trusted worker's replay and stub follow its own work; the candidate's round followed
    ~30 ms of idling while the trusted side ran, and its window on an H200 spent 0.1-0.2 ms more getting to
    the harness and drawing its sets (session 15, Sigmoid and Sum at head size 0.86-0.90 of KernelBench)."""
    if device == "cuda":
        c = _cuda_refs(torch)
        c["zero"](c["flush"][:1])
        if c.get("pad_cycles"):
            # a padded round's calls are spins counted in the card's cycles: a card coming back from the idle
            # of the other side's window at a lower clock stretches every pad, and the round, alike (an open
            # question of session 24, `benchmarks/gpu_round_noise.py --idle-ms`); spun up first, off the clock
            c["spin"](int(c["pad_cycles"]) * WAKE_SPIN_PADS)
        c["sync"]()


def wake_enabled(device: str, config: VerifyConfig) -> bool:
    """Whether each clocked window is preceded by a `wake` handshake with its worker: `VerifyConfig.wake`
    ("on"/"off"), else `EVOKERNEL_WAKE`; off by default until measured on a GPU (issue 33). On the
    CPU the handshake only wakes the thread (there is no context to touch)."""
    mode = str(config.wake or os.environ.get("EVOKERNEL_WAKE") or "off")
    return mode == "on" and device in ("cuda", "cpu")


if "torch" in sys.modules:  # the harness and the reference worker import torch first: take the references now
    try:
        _take_cuda_refs(sys.modules["torch"])
    except AttributeError:
        pass
