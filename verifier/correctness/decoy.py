"""Decoy kernels: a custom kernel must run on every forward, and its result must reach the output.

Two rules, both read by the dynamic anti-hacking gate (`kernel_findings`):

* `custom-kernel-skipped` — some forward the harness made (a correctness trial, the decoy probe, the
  profiled call, a timed call) called no custom kernel function, while others did. The harness counts
  calls into the built extension per forward call (`CountingModule`, Triton's launch hook); timed calls
  are counted by a wrapper around the model (`counted_model`: one dict read and a list append per call).
* `decoy-kernel` — the kernel ran beside torch and its result was thrown away. Two checked forwards,
  placed among the correctness trials by the parent's secret generator (`plan`), run with the harness's
  wrapper around every custom-kernel call (`Probe.call`) replacing what the call returned, and every
  tensor argument the call wrote in place (found by comparing the arguments' bits before and after the
  call), with garbage of the same shape and dtype: the call's own values rolled by a random offset (so
  ranges, sums and histograms stay plausible and integer indices stay in range), noise where a roll
  changes nothing. The offsets come from `os.urandom`, drawn at the probe.
  - The *replay* repeats the inputs of an earlier correctness trial (never the trial just before it);
    the parent compares its outputs with that trial's bit for bit (`trials.Trials.output_digests`):
    unchanged means no kernel result reached the output.
  - The *fresh probe* takes the place of one ordinary trial: inputs drawn like every trial's, which the
    candidate has never seen; its outputs are compared with the reference's for those inputs, and still
    right (within the task's tolerance) means no kernel result reached the output. Before it (issue 37)
    the only checked forward was a repeat, so a kernel that computed on a repeated input and handed
    torch's answer back on every fresh one was feasible.
  Either finding refuses the verdict. An output that changes (or goes wrong) is fine. A forward that
  raises in either checked call is refused too (`verdict`): before issue 37's fourth round a raise read
  as "the result reached the control flow", so a kernel that checked its own result against a
  fingerprint and raised on garbage skipped the check (`tests/candidates/hostile_round4/
  raises_on_garbled_result.py`).
* `copy-kernel` (kernelbench policy) — in either checked forward every tensor the kernel produced was one
  of its own inputs handed back (`passed_through`) while torch computed (`copy_only`).

What the candidate sees of the probes: the replay, a forward on inputs it has seen before, with the same
tensors, shapes and devices; the fresh probe, a forward like every trial's; no flag (the probe state sits
in the counting wrapper's closure, not on an attribute, and the command is a local of the harness). What
it could still do — see docs/ARCHITECTURE.md, "Decoy kernels": count forwards; check its kernel's result
against its own computation of a few elements (or ask its own C++ whether the result it holds is the one
it returned) and raise when it differs; stitch a tiny kernel result into a torch output.
"""

from __future__ import annotations

import os
from contextlib import contextmanager

from verifier.correctness.bit_digest import Bits, KeyedDigest, equal_bits, round_trips

PROBE_KEY = "probe"  # the counter's key holding the active `Probe` (None between probes)


# --- inside the sandbox -------------------------------------------------------------------------------
def _tensors(torch, value) -> list:
    """Tensors of one argument or return value: a tensor, or a list/tuple of them (one level)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def _storage(t) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse): no alias to see
        return None


def passed_through(torch, digest: KeyedDigest, t, u, old: Bits, unchanged: bool) -> bool:
    """Whether `t`, a tensor a custom-kernel call produced, is its argument `u` handed back (`old`: the digest
    of `u`'s bits before the call; `unchanged`: the call left `u`'s bits as they were) in any form that does
    none of the work: the same values at the same shape (a copy, or `u` itself); a view of `u` of any
    shape while the call wrote nothing into `u` (an honest in-place kernel returns `u` *changed*); the
    same elements in order at another shape (a flattened or reshaped copy); or a lossless copy in another
    dtype (float32 to float64 and back gives the same bits)."""
    n = t.numel()
    if not n:
        return tuple(t.shape) == old.shape and t.dtype == old.dtype
    if unchanged and t.device == u.device and _storage(t) is not None and _storage(t) == _storage(u):
        return True  # a view of the untouched input (flattened, sliced, transposed, expanded)
    if n != old.numel:
        return False
    try:
        if t.dtype == old.dtype:
            return digest.of(t).same_values(old)  # a copy at this shape or another
        if t.is_complex() != (torch.empty((), dtype=old.dtype).is_complex()):
            return False
        # converted to `u`'s dtype it is `u`, and nothing was lost on the way (so `u` converted back is `t`)
        return digest.of(t, as_dtype=old.dtype).same_values(old) and round_trips(torch, t, old.dtype)
    except Exception:  # noqa: BLE001 - a dtype with no conversion: not a copy we can prove
        return False


class Probe:
    """The garbage forward's state, held by the harness for one forward call."""

    def __init__(self, torch):
        self.torch = torch
        self.seed = int.from_bytes(os.urandom(8), "little") & ((1 << 62) - 1)
        self.replaced = 0  # tensors replaced (returned or written in place)
        self.calls = 0
        self.results = 0  # tensors the kernel produced (returned, or written in place)
        self.copies = 0  # of those, one of the call's own inputs handed back (`passed_through`: copy-kernel)
        self.reruns = 0  # calls run again on noise because they seemed to return and write nothing
        # what each call's arguments held before it, as keyed chunk digests rather than copies (a copy of a
        # 6.4 GB input beside the call's own tensors put the harness past the memory plan; `bit_digest`)
        self.digest = KeyedDigest(torch)

    def _offset(self, n: int) -> int:
        self.seed = (self.seed * 6364136223846793005 + 1442695040888963407) & ((1 << 64) - 1)
        return 1 + (self.seed >> 11) % max(1, n - 1)

    def _written_by_rerun(self, fn, args: tuple, kwargs: dict, given: list) -> list:
        """The arguments a call writes, for a call that returned nothing and changed no bit: it may have
        written exactly what its output already held (an output buffer reusing a block an earlier forward
        on the same inputs freed: an honest kernel refused as a decoy). The call runs once more with every
        tensor argument filled with noise first; those it writes no longer hold their noise. Every argument
        is then put back as it was before the first call (the only copies the probe makes of arguments:
        nothing changed, so what they hold now is what they held before)."""
        torch = self.torch
        saved = [t.detach().clone() for t in given]
        noise = []
        try:
            with torch.no_grad():
                for t in given:
                    n = self.garbage_like(t)
                    t.copy_(n)
                    noise.append(self.digest.of(n))
                    del n
                fn(*args, **kwargs)
                if any(t.is_cuda for t in given) and torch.cuda.is_available():
                    torch.cuda.synchronize()
                found = [t for t, n in zip(given, noise, strict=False) if not self.digest.of(t).same(n)]
        except Exception:  # noqa: BLE001 - an argument that cannot be written, a call that fails on noise
            found = []
        with torch.no_grad():
            for t, old in zip(given, saved, strict=True):
                try:
                    t.copy_(old)
                except Exception:  # noqa: BLE001 - it could not be written: it still holds what it held
                    pass
        return found

    def garbage_like(self, t):
        """A new tensor of `t`'s shape and dtype, bitwise different from `t` (when `t` has elements)."""
        torch = self.torch
        flat = t.detach().reshape(-1)
        n = flat.numel()
        if n == 0:
            return t.detach().clone()
        out = torch.roll(flat, self._offset(n)) if n > 1 else flat.clone()
        if equal_bits(torch, out, flat):
            gen = torch.Generator(device=flat.device)
            gen.manual_seed(self._offset(1 << 62))
            if flat.dtype == torch.bool:
                out = ~flat
            elif flat.is_floating_point() or flat.is_complex():
                scale = float(flat.abs().max()) + 1.0 if flat.is_floating_point() else 1.0
                noise = torch.randn(flat.shape, generator=gen, device=flat.device, dtype=torch.float32) * scale
                out = (flat.to(torch.float32) + noise + scale).to(flat.dtype)
            else:
                out = torch.where(flat > 0, flat - 1, flat + 1)
        return out.reshape(t.shape)

    def call(self, fn, args: tuple, kwargs: dict):
        """`fn(*args, **kwargs)` with its result, and every tensor argument it changed, turned to garbage."""
        torch = self.torch
        self.calls += 1
        given = [t for v in (*args, *kwargs.values()) for t in _tensors(torch, v)]
        before = [self.digest.of(t) for t in given]
        result = fn(*args, **kwargs)
        if any(t.is_cuda for t in given) and torch.cuda.is_available():
            torch.cuda.synchronize()
        unchanged = [self.digest.of(u).same(old) for u, old in zip(given, before, strict=True)]
        written = [t for t, same in zip(given, unchanged, strict=True) if not same]
        rerun = False
        if not written and not _tensors(torch, result) and given:
            self.reruns += 1
            rerun = True
            written = self._written_by_rerun(fn, args, kwargs, given)
            unchanged = [self.digest.of(u).same(old) for u, old in zip(given, before, strict=True)]
        for t in _tensors(torch, result) + written:
            self.results += 1
            # found by the rerun, `t` holds what it held before (its own "before" is not a copy of an input)
            self.copies += any(passed_through(torch, self.digest, t, u, old, same)
                               for u, old, same in zip(given, before, unchanged, strict=True)
                               if not (rerun and u is t))
        for t in written:
            with torch.no_grad():
                t.copy_(self.garbage_like(t))
            self.replaced += 1
        if isinstance(result, torch.Tensor):
            self.replaced += 1
            return self.garbage_like(result)
        if isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) for r in result):
            out = [self.garbage_like(r) if isinstance(r, torch.Tensor) else r for r in result]
            self.replaced += sum(isinstance(r, torch.Tensor) for r in result)
            return type(result)(out) if isinstance(result, tuple) else out
        return result


def through(counter: dict, fn, args: tuple, kwargs: dict):
    """A custom-kernel call as the harness's wrappers make it: through the probe while one is active."""
    probe = counter.get(PROBE_KEY)
    if probe is not None:
        return probe.call(fn, args, kwargs)
    return fn(*args, **kwargs)


def counted_model(model, counter: dict, per_call: list):
    """`model` for a timed round: each call's number of custom-kernel calls appended to `per_call`."""

    def forward(*args):
        before = counter["calls"]
        out = model(*args)
        per_call.append(counter["calls"] - before)
        return out

    return forward


SCRUB_BLOCKS = 512  # at most this many free blocks of the CUDA caching allocator are scrubbed per forward


def scrub_free_cuda_memory(torch) -> int:
    """Fill the CUDA caching allocator's free blocks with random bytes before a correctness trial or the
    probe: returns how many were filled.

    The probe finds what a kernel wrote by comparing its arguments' bits before and after the call. An
    honest Triton softmax on an H200 was refused as a decoy: its `torch.empty_like` output came back in
    the block an earlier forward on the same inputs had freed, still holding that forward's result, so its
    writes changed no bit and nothing was garbled. Filled blocks make every write show. They are filled
    before every trial, not only the probe, so a kernel cannot tell the probe by what fresh memory holds;
    a kernel that leaves part of an output unwritten shows noise there too when that output comes from a
    filled block (one fresh from the driver holds whatever the driver gave, often zeros). The
    bytes come from a private generator seeded from `os.urandom`: the model's own random state is not
    touched."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return 0
    try:
        sizes = sorted((int(b["size"]) for seg in torch.cuda.memory_snapshot() for b in seg.get("blocks", [])
                        if b.get("state") == "inactive" and int(b.get("size", 0)) > 0), reverse=True)
    except Exception:  # noqa: BLE001 - no snapshot (another allocator backend): nothing to scrub
        return 0
    gen = torch.Generator(device="cuda")
    gen.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    held = []
    for size in sizes[:SCRUB_BLOCKS]:
        try:
            block = torch.empty(size, dtype=torch.uint8, device="cuda")
        except RuntimeError:  # out of memory: the rest stay as they are
            break
        block.random_(0, 256, generator=gen)
        held.append(block)
    torch.cuda.synchronize()
    filled = len(held)
    del held  # back to the cache, holding noise
    return filled


def probe_forward(torch, model, inputs: list, counter: dict) -> tuple[object, dict]:
    """One forward with every custom-kernel result replaced by garbage: (outputs or None, what happened)."""
    probe = Probe(torch)
    before = counter["calls"]
    counter[PROBE_KEY] = probe
    try:
        out = model(*inputs)
    except Exception as exc:  # noqa: BLE001 - garbage may well break forward: the result reached it
        return None, {"kernel_calls": counter["calls"] - before, "replaced": probe.replaced,
                      "results": probe.results, "copies": probe.copies, "reruns": probe.reruns,
                      "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    finally:
        counter[PROBE_KEY] = None
    return out, {"kernel_calls": counter["calls"] - before, "replaced": probe.replaced, "results": probe.results,
                 "copies": probe.copies, "reruns": probe.reruns}


class Flow:
    """Where the custom kernel's results go in one ordinary forward (issue 37's mimic): every tensor a custom
    call returns or writes in place, unless it is one of the call's own inputs handed back
    (`passed_through`), is marked, and a dispatch mode (`flow_mode`) marks every tensor a torch operator
    computes from a marked one. The forward's output then either carries a mark — some of the kernel's
    result reached it, through any number of torch ops — or not: the kernel ran, torch computed the
    answer, and the kernel's result went nowhere but, at most, into control flow (`torch.equal`, `.item()`).

    Nothing is garbled and no name is read: a kernel that checks its own result against a fingerprint and
    hands torch's answer back whenever it looks right (`tests/candidates/hostile_round4/
    mimics_on_garbled_result.py`) fools the garbling probes, whose garbage it sees, but not this. Marks
    are storages (views share them); every marked tensor is held until the forward ends, so no freed
    address is reused by an unmarked one."""

    def __init__(self, torch):
        self.torch = torch
        self.marked: set[tuple[str, int]] = set()
        self.held: list = []
        self.calls = 0
        self.results = 0  # tensors the kernel produced (returned or wrote), copies of its inputs excluded
        self.copies = 0
        self.digest = KeyedDigest(torch)  # what a call's arguments held before it (`Probe.digest`)
        self.quiet = 0  # inside `aside`: the dispatch mode marks nothing

    def key(self, t) -> tuple[str, int] | None:
        ptr = _storage(t)
        return (str(t.device), ptr) if ptr else None

    def mark(self, t) -> None:
        k = self.key(t)
        if k is not None:
            self.marked.add(k)
            self.held.append(t)

    def is_marked(self, t) -> bool:
        k = self.key(t)
        return k is not None and k in self.marked

    def call(self, fn, args: tuple, kwargs: dict):
        torch = self.torch
        self.calls += 1
        given = [t for v in (*args, *kwargs.values()) for t in _tensors(torch, v)]
        with self.aside():
            before = [self.digest.of(t) for t in given]
        result = fn(*args, **kwargs)
        with self.aside():
            if any(t.is_cuda for t in given) and torch.cuda.is_available():
                torch.cuda.synchronize()
            unchanged = [self.digest.of(u).same(old) for u, old in zip(given, before, strict=True)]
            written = [t for t, same in zip(given, unchanged, strict=True) if not same]
            for t in _tensors(torch, result) + written:
                if any(passed_through(torch, self.digest, t, u, old, same)
                       for u, old, same in zip(given, before, unchanged, strict=True)):
                    self.copies += 1
                    continue
                self.results += 1
                self.mark(t)
        return result

    @contextmanager
    def aside(self):
        """The flow's own bookkeeping (digests, comparisons): not followed by the dispatch mode, so none of
        its temporaries is marked and held until the forward ends (a chunk-sized product per chunk of a
        marked argument would add up to the argument's size again)."""
        self.quiet += 1
        try:
            yield
        finally:
            self.quiet -= 1


def flow_mode(torch, flow: Flow):
    """A dispatch mode that marks what torch computes from marked tensors (outputs of an op with a marked
    input; an in-place or `out=` op returns the tensor it wrote, so that is marked too)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class _FlowMode(TorchDispatchMode):
        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            # no `torch._disable_dynamo` wrapper: its first call imports torch._dynamo (1.5-3 s on a 2-core
            # machine), which rebinds torch functions (`torch.manual_seed`): a monkey-patch to the audit
            return False

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if flow.quiet:
                return out
            leaves = tree_flatten((args, kwargs))[0]
            if any(isinstance(t, torch.Tensor) and flow.is_marked(t) for t in leaves):
                for t in tree_flatten(out)[0]:
                    if isinstance(t, torch.Tensor):
                        flow.mark(t)
            return out

    return _FlowMode()


def flow_forward(torch, model, inputs: list, counter: dict) -> tuple[object, dict]:
    """One ordinary forward whose custom-kernel results are followed (`Flow`): (outputs, what happened).
    `reached`: some output carries the kernel's result. Raises what forward raises (an ordinary trial)."""
    flow = Flow(torch)
    before = counter["calls"]
    counter[PROBE_KEY] = flow
    try:
        with flow_mode(torch, flow):
            out = model(*inputs)
    finally:
        counter[PROBE_KEY] = None
    # the outputs as the trial takes them (a tensor or a tuple/list of tensors; anything else is refused by
    # the trial itself, `paired_calls.plain_outputs`, which this room may not import)
    items = [out] if isinstance(out, torch.Tensor) else list(out) if isinstance(out, (tuple, list)) else []
    reached = any(type(o) is torch.Tensor and flow.is_marked(o) for o in items)
    record = {"kernel_calls": counter["calls"] - before, "results": flow.results, "copies": flow.copies,
              "reached": reached}
    flow.held.clear()
    return out, record


def flow_verdict(record: dict | None) -> str | None:
    """The decoy finding of the followed forward: the kernel produced results and none reached an output."""
    if not isinstance(record, dict) or not record.get("kernel_calls") or not record.get("results"):
        return None
    if record.get("reached") is not False:
        return None
    return (f"in an ordinary forward the custom kernel produced {record['results']} tensor(s) and none of them "
            "reached forward's output, not even through torch operators: torch computed what forward returned "
            "(at most the kernel's result decided which answer to return); compute the output from the kernel")


# --- the trusted side ---------------------------------------------------------------------------------
def plan(rng, trials: int) -> dict:
    """Where the two checked forwards go among the `trials` + 1 ordinary trials the reference prepares
    (`ordinary_slots`), drawn from the run's secret generator: slot `fresh` is run as the fresh probe (its
    own inputs, seen once, like any trial's: its garbled outputs are judged against the reference's), and
    the replay goes after trial `after`, replaying trial `of` (both among the other slots; `of` < `after`
    when there are two or more of them, so a buffer the candidate keeps holds another trial's values when
    the replay runs). A kernel that behaves on a repeat and cheats on inputs it has not seen meets the
    fresh probe; one that tells the fresh probe by its inputs would have to tell it from every trial."""
    slots = ordinary_slots(trials)
    fresh = rng.randrange(0, slots)
    clean = [k for k in range(slots) if k != fresh]
    if len(clean) < 2:
        return {"after": clean[0], "of": clean[0], "fresh": fresh}
    at = rng.randrange(1, len(clean))
    return {"after": clean[at], "of": clean[rng.randrange(0, at)], "fresh": fresh}


def ordinary_slots(trials: int) -> int:
    """The ordinary (task-distribution) trials the reference prepares for `trials` correctness trials: one
    more, run as the fresh probe (`plan`)."""
    return max(1, trials) + 1


def verdict(record: dict) -> str | None:
    """The decoy finding of a probe record (None: the kernel's result reached the output)."""
    if record and record.get("kernel_calls") and record.get("reruns") and not record.get("results"):
        # Checked before the outputs and before an error: a kernel that tells the rerun apart (its second
        # call in one forward, on noise) could otherwise signal its Python side to change the output or raise.
        return ("the custom kernel returned and wrote no tensor in one checked forward, even when run again on "
                "noise: none of its work can reach the output; compute the output with the kernel")
    if record and record.get("error"):
        # A checked forward raised. Its inputs are a repeat of a trial the kernel passed, or a fresh draw from
        # the trials' own distribution, so nothing about them makes an honest forward fail; only the garbage
        # put in place of the kernel's results differs, and an honest forward computes with that garbage, it
        # does not check it. A forward that inspects its kernel's results (against a fingerprint, a few
        # elements computed again) and raises on garbage escaped the decoy check when a raise read as "the
        # result reached the control flow" (issue 37): it is refused, whether or not the kernel had run yet.
        where = "on fresh inputs" if record.get("fresh") else "replaying a trial's inputs"
        when = ("after the custom kernel's results were replaced by garbage" if record.get("kernel_calls")
                else "before calling the custom kernel")
        return (f"forward raised in a checked call {where} {when} ({str(record['error'])[:160]}): a forward that "
                "passes its trials must not fail on a checked call; compute the output from the kernel's "
                "result and do not check or fingerprint it")
    if not record or not record.get("kernel_calls"):
        return None
    if record.get("fresh"):  # inputs the candidate had not seen: its garbled outputs against the reference's
        if record.get("right") is not True:
            return None
        what = (f"{record.get('replaced', 0)} tensor(s) the custom kernel returned or wrote" if record.get("replaced")
                else "the custom kernel returned and wrote no tensor, and")
        return (f"{what} were replaced by garbage in one checked forward on fresh inputs and its outputs were "
                "still right: the kernel's result never reaches the output; compute the output with the kernel")
    trial, probe = record.get("trial_digests"), record.get("probe_digests")
    if not trial or trial != probe:
        return None
    what = (f"{record.get('replaced', 0)} tensor(s) the custom kernel returned or wrote" if record.get("replaced")
            else "the custom kernel returned and wrote no tensor, and")
    return (f"{what} were replaced by garbage in one checked forward and its outputs did not change: "
            "the kernel's result never reaches the output; compute the output with the kernel")


def probe_records(cand: dict) -> list[dict]:
    """The checked forwards' records: the replay of a trial (`decoy_probe`) and the fresh probe
    (`fresh_probe`), those the run has."""
    return [r for r in (cand.get("decoy_probe"), cand.get("fresh_probe")) if isinstance(r, dict) and r]


def work_record(cand: dict) -> dict | None:
    """The probe record that says what the kernel's results were (`evidence.kernel_work_ms`): one that saw
    every result be an input handed back when either did, else the first."""
    records = probe_records(cand)
    for r in records:
        results, copies = r.get("results"), r.get("copies")
        if isinstance(results, int) and isinstance(copies, int) and results > 0 and copies == results:
            return r
    return records[0] if records else None


def called(cand: dict) -> bool:
    """Whether any forward the harness made called the custom kernel: a correctness trial, or a checked
    forward (the fresh probe may be the first forward, and a kernel that runs only there is skipped on
    the others, not unused)."""
    trials = [c for c in cand.get("kernel_calls", []) if isinstance(c, int)]
    return any(trials) or any(isinstance(r.get("kernel_calls"), int) and r["kernel_calls"] > 0
                              for r in probe_records(cand))


def kernel_findings(cand: dict) -> list[tuple[str, str]]:
    """(rule, message) for forwards that called no custom kernel while others did, and for a decoy (in
    either checked forward: the replay of a trial or the fresh probe)."""
    found: list[tuple[str, str]] = []
    trials = [c for c in cand.get("kernel_calls", []) if isinstance(c, int)]
    records = probe_records(cand)
    if not called(cand):
        return found  # no forward called it: custom-kernel-unused, the gate's own rule
    skipped = []
    if any(c == 0 for c in trials):
        skipped.append(f"{sum(c == 0 for c in trials)} of {len(trials)} correctness trials")
    for probe in records:
        if not probe.get("error") and probe.get("kernel_calls") == 0:
            skipped.append("the checked call on fresh inputs" if probe.get("fresh") else "the checked replay of a trial")
    if cand.get("profile_kernel_calls") == 0:
        skipped.append("the profiled call")
    timed = cand.get("timed_forwards")
    if isinstance(timed, list) and len(timed) == 2 and timed[1]:
        skipped.append(f"{timed[1]} of {timed[0]} timed calls")
    if skipped:
        found.append(("custom-kernel-skipped", "forward did not call the custom kernel on " + ", ".join(skipped)
                      + "; every forward must run it"))
    decoy = next((d for d in map(verdict, records) if d), None) or flow_verdict(cand.get("kernel_flow"))
    if decoy:
        found.append(("decoy-kernel", decoy))
    copying = next((c for c in (copy_only(r, cand.get("work_split")) for r in records) if c), None)
    if copying:
        found.append(("copy-kernel", copying))
    return found


COPY_TORCH_FLOOR_MS = 0.05  # torch compute below this (per forward) is set-up, not the work


def copy_only(record: dict, split: dict | None) -> str | None:
    """The copy-kernel finding: every tensor the custom kernel produced in the checked forward was, bit for
    bit, one of that call's own inputs (it returned or copied an input), while torch operators computed in
    the same forward. Such a kernel does none of the work it launders; under the kernelbench policy torch
    may do *part* of the work, not all of it. A copy kernel with no torch work beside it is left to the
    correctness gate (a ReLU copying non-negative inputs is right there, and wrong on other inputs)."""
    if not record or not split:
        return None
    results, copies = record.get("results"), record.get("copies")
    if not isinstance(results, int) or not isinstance(copies, int) or results <= 0 or copies != results:
        return None
    torch_ms = float(split.get("torch_ms", 0.0) or 0.0)
    if torch_ms < COPY_TORCH_FLOOR_MS:
        return None
    ops = ", ".join(str(op[0]) for op in list(split.get("torch_ops", []))[:3] if op)
    return (f"every tensor the custom kernel produced was a copy of one of its inputs while torch ops ({ops}) "
            "computed in forward: the kernel does none of the work; compute the result in it")
