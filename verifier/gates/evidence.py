"""The five gates. Each reads the evidence of one run and returns a `GateResult`; none runs candidate code."""

from __future__ import annotations

import contextlib
import math
import os
import re
import time
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from verifier.correctness.compare import compare_tensor, output_spread
from verifier.correctness.decoy import called, kernel_findings, work_record
from verifier.policy.rules import Policy
from verifier.policy.static_scan import RULES, Violation, scan
from verifier.result import FAIL, PASS, SKIP, GateResult

if TYPE_CHECKING:
    from verifier.sandbox.supervisor import SandboxOutcome

OP_FAMILIES = {
    "matmul": re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|einsum|_addmm_activation|addbmm)$"),
    "softmax": re.compile(r"aten::(_?softmax|_?log_softmax|_safe_softmax)$"),
    "conv": re.compile(r"aten::(_?convolution|conv\w*|mkldnn_convolution|_slow_conv2d_forward|slow_conv\w*|_nnpack\w*|cudnn_convolution\w*)$"),
    "layer_norm": re.compile(r"aten::(native_layer_norm|layer_norm)$"),
    "batch_norm": re.compile(r"aten::(native_batch_norm|batch_norm|_batch_norm_impl_index|_native_batch_norm_legit\w*|cudnn_batch_norm)$"),
    "group_norm": re.compile(r"aten::(native_group_norm|group_norm)$"),
    "rms_norm": re.compile(r"aten::(_fused_rms_norm|rms_norm)$"),
    "attention": re.compile(r"aten::(scaled_dot_product_attention|_scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*)$"),
}
DOMINANT_SHARE = 0.10


def op_family(name: str) -> str:
    for family, pattern in OP_FAMILIES.items():
        if pattern.match(name):
            return family
    return name


def dominant_ops(profile: list[dict], ignored: AbstractSet[str]) -> list[str]:
    """The reference's aten ops that take at least 10% of its self time: a candidate must not run them."""
    rows = [r for r in profile if r["name"].startswith("aten::") and r["name"] not in ignored]
    total = sum(r["self_ms"] for r in rows) or 1.0
    return [r["name"] for r in rows if r["self_ms"] / total >= DOMINANT_SHARE]


@dataclass
class Evidence:
    """What the parent knows after the runs: the candidate's source, both reports, files and marks."""

    source: str
    backend: str
    config: object
    reference: dict = field(default_factory=dict)
    reference_dir: Path | None = None
    candidate: dict = field(default_factory=dict)
    candidate_dir: Path | None = None
    outcome: SandboxOutcome | None = None
    marks: list = field(default_factory=list)
    counts_kernel_calls: bool = True


class Gate:
    name = "gate"

    def _result(self, status: str, start: float, reason: str = "", **detail) -> GateResult:
        return GateResult(self.name, status, time.monotonic() - start, reason, detail)


class AntiHackingGate(Gate):
    """Static AST/C++ rules before anything runs; dynamic checks from the sandboxed run afterwards.

    The policy (`verifier.policy.rules`) decides which raised rules refuse the candidate; the others are
    reported in the gate's detail (`reported`) and, with the share of forward's time each library op took
    (`library_ops`), shown beside a passing gate."""

    name = "anti_hacking"

    def __init__(self, policy: Policy | None = None):
        self.policy = policy or Policy()

    def static(self, source: str, backend: str) -> GateResult:
        start = time.monotonic()
        return self._judge(start, scan(source, backend), checks="static")

    def _judge(self, start: float, violations: list[Violation], **detail) -> GateResult:
        refused = [v for v in violations if self.policy.refuses(v.rule)]
        reported = [v for v in violations if not self.policy.refuses(v.rule)]
        if refused:
            return self._fail(start, refused, reported)
        if reported:
            detail["reported"] = [v.to_dict() for v in reported]
            detail["policy"] = self.policy.to_dict()
        return self._result(PASS, start, reported_reason(reported, self.policy), **detail)

    def _fail(self, start: float, violations: list[Violation], reported: list[Violation] | None = None) -> GateResult:
        first = violations[0]
        reason = f"line {first.line}: [{first.rule}] {first.message}" if first.line else f"[{first.rule}] {first.message}"
        extra = {"reported": [v.to_dict() for v in reported]} if reported else {}
        return self._result(FAIL, start, reason, rule=first.rule, line=first.line,
                            rule_help=RULES.get(first.rule, ""), violations=[v.to_dict() for v in violations],
                            policy=self.policy.to_dict(), **extra)

    def dynamic(self, ev: Evidence, ignored_ops: AbstractSet[str]) -> GateResult:
        start = time.monotonic()
        cand = ev.candidate
        found: list[Violation] = []
        patched = sorted(set(cand.get("patched", [])) | set(cand.get("patched_after_forward", [])))
        if patched:
            found.append(Violation("monkey-patch", 0, f"the candidate replaced {', '.join(patched[:5])}"))
        if cand.get("reference_tripwire"):
            found.append(Violation("reference-model", 0, "the candidate instantiated the reference Model at run time"))
        if cand.get("threads_after_forward", 0) > 0:
            found.append(Violation("concurrency", 0, f"{cand['threads_after_forward']} thread(s) still ran after forward returned"))
        if ev.counts_kernel_calls and "kernel_calls" in cand:
            if not cand.get("builds"):
                found.append(Violation("no-custom-kernel", 0, "no custom kernel was built: call load_inline with your kernel"))
            elif not called(cand):
                found.append(Violation("custom-kernel-unused", 0, "forward never called the custom kernel"))
            else:  # it ran: on every forward, and did its result reach the output? (verifier/correctness/decoy.py)
                found.extend(Violation(rule, 0, msg) for rule, msg in kernel_findings(cand))
        ref_ops = dominant_ops(ev.reference.get("profile", []), ignored_ops)
        families = {op_family(op): op for op in ref_ops}
        ran = [op for op in cand.get("ops_run", []) if op_family(op) in families]
        if ran:
            found.append(Violation("reference-op-at-runtime", 0,
                                   f"{ran[0]} ran inside ModelNew.forward; the reference's {families[op_family(ran[0])]} must be replaced by the custom kernel"))
        found += _scan_built_sources(ev.marks)
        probe = work_record(cand)  # the checked forward that says what the kernel's results were
        outside = _torch_outside_kernel(cand.get("work_split"), copies_are_work=_copy_task(ev.reference.get("profile", [])),
                                        probe=probe)
        if outside:
            found.append(Violation("torch-work-outside-kernel", 0, outside))
        if ev.candidate.get("gpu_probes") is not None:
            from verifier.clock.gpu_timing import gpu_findings

            found.extend(Violation(rule, 0, msg) for rule, msg in gpu_findings(cand, ev.reference, ev.marks))
        detail: dict = {"checks": "static+dynamic", "reference_dominant_ops": ref_ops}
        if ev.candidate.get("gpu_probes") is not None:
            detail["gpu_probes"] = len(ev.candidate["gpu_probes"])
        library = library_ops(cand.get("work_split"), probe=probe)
        if library:
            detail["library_ops"] = library
        return self._judge(start, found, **detail)


def reported_reason(reported: list[Violation], policy: Policy) -> str:
    """One line for a gate that passed with rules the policy reports but does not refuse."""
    if not reported:
        return ""
    names = sorted({v.rule for v in reported})
    return f"passes under the {policy.label()} policy, reported: {', '.join(names)}"


def kernel_work_ms(split: dict, probe: dict | None) -> float:
    """The custom kernel's profiled time as forward's compute: none of it where the checked forward saw
    every tensor the kernel produced be one of its own inputs handed back (copied, viewed, reshaped:
    `decoy.passed_through`). Such a kernel's time, however long, is no part of the work; counted, a
    kernel making three useless passes over its input made torch's relu read as 6% of forward."""
    kernel_ms = float(split.get("kernel_ms", 0.0) or 0.0)
    if isinstance(probe, dict):
        results, copies = probe.get("results"), probe.get("copies")
        if isinstance(results, int) and isinstance(copies, int) and results > 0 and copies == results:
            return 0.0
    return kernel_ms


def library_ops(split: dict | None, limit: int = 8, probe: dict | None = None) -> list[dict]:
    """The library ops (torch/ATen) that ran in forward beside the custom kernel, each with its time and
    its share of forward's measured compute (the kernel's work, `kernel_work_ms`, + library ops + ATen's
    copies), largest first: what the kernelbench policy allows, named so a person sees how much of the
    speed is the library's."""
    if not split:
        return []
    torch_ms = float(split.get("torch_ms", 0.0) or 0.0)
    total = kernel_work_ms(split, probe) + torch_ms + float(split.get("copy_ms", 0.0) or 0.0)
    if total <= 0:
        return []
    rows = []
    for item in list(split.get("torch_ops", []))[:limit]:
        try:
            name, ms = str(item[0])[:80], float(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        rows.append({"op": name, "ms": round(ms, 4), "share": round(ms / total, 4)})
    return rows


def _scan_built_sources(marks: list) -> list[Violation]:
    """The static C++ rules again, over the text the builder actually compiled (reported before it ran)."""
    from verifier.policy.static_scan import scan_cpp

    found: list[Violation] = []
    for _, mark in marks:
        if not isinstance(mark, dict) or mark.get("phase") != "source":
            continue
        if mark.get("truncated"):
            found.append(Violation("cpp-escape", 0, "the C++ source built at run time is too large to check"))
        for v in scan_cpp(1, str(mark.get("text", ""))):
            found.append(Violation(v.rule, 0, f"in the C++ built at run time, line {v.line}: {v.message}"))
    return found


TORCH_WORK_SHARE = 0.25
TORCH_WORK_FLOOR_MS = 0.05


def _copy_task(profile: list[dict]) -> bool:
    """The reference's own work is mostly ATen's copy (a transpose or layout change made contiguous)."""
    rows = [r for r in profile if str(r.get("name", "")).startswith("aten::")]
    total = sum(float(r.get("self_ms", 0.0)) for r in rows) or 1.0
    return sum(float(r.get("self_ms", 0.0)) for r in rows if r["name"] == "aten::copy_") / total >= DOMINANT_SHARE


def _torch_outside_kernel(split: dict | None, copies_are_work: bool = False, probe: dict | None = None) -> str | None:
    """Torch compute ops around the custom kernel must not do most of forward's work; where the task is
    itself a copy, ATen's copy counts as such an op (a kernel that only re-strides and lets it copy)."""
    if not split:
        return None
    kernel_ms, torch_ms = kernel_work_ms(split, probe), float(split.get("torch_ms", 0.0))
    ops_list = list(split.get("torch_ops", []))
    if copies_are_work and float(split.get("copy_ms", 0.0)) > 0:
        torch_ms += float(split["copy_ms"])
        ops_list = sorted([*ops_list, ("aten::copy_", float(split["copy_ms"]))], key=lambda r: r[1], reverse=True)
    if torch_ms < TORCH_WORK_FLOOR_MS or torch_ms <= TORCH_WORK_SHARE * (kernel_ms + torch_ms):
        return None
    ops = ", ".join(name for name, _ in ops_list[:3])
    share = torch_ms / (kernel_ms + torch_ms)
    return (f"torch ops ({ops}) took {share:.0%} of forward's compute time outside the custom kernel; "
            "move that work into the kernel")


class CompileGate(Gate):
    """Passes when the candidate module imported and its kernels built; fails with parsed diagnostics."""

    name = "compile"

    def evaluate(self, ev: Evidence) -> GateResult:
        cand = ev.candidate
        builds = cand.get("builds", [])
        seconds = sum(b.get("seconds", 0) for b in builds)
        if cand.get("phase") == "error" and cand.get("failed_phase") in ("build", "start"):
            if "build_error" in cand:
                be = cand["build_error"]
                return GateResult(self.name, FAIL, seconds, f"compile error: {be['message']}",
                                  {"diagnostics": be.get("diagnostics", []), "log": be.get("log", "")[-4000:]})
            return GateResult(self.name, FAIL, seconds,
                              f"importing the candidate failed: {cand.get('error_type')}: {cand.get('error', '')[:300]}",
                              {"traceback": cand.get("traceback", "")})
        if not cand or cand.get("phase") in ("build",):
            if _reached(ev.marks, "correctness"):
                return GateResult(self.name, PASS, seconds, "", {"builds": builds, "note": "built; the run ended later"})
            reason = _no_report_reason(ev, "while building")
            if ev.outcome is not None and ev.outcome.timed_out:
                reason += build_timeout_hint(cand.get("shared_builds") or [])
            return GateResult(self.name, FAIL, seconds, reason, no_report_detail(ev))
        hits = sum(1 for b in builds if b.get("cache_hit"))
        return GateResult(self.name, PASS, seconds, "", {"builds": builds, "cache_hits": hits,
                                                         "import_seconds": cand.get("import_seconds")})


# Text the candidate's process writes (error messages, tracebacks, build diagnostics) reaches the verdict,
# the app and the next prompt: it is bounded here, whatever the sandbox let the candidate read.
REPORT_LIMITS = {"error_type": 80, "error": 300, "traceback": 4000, "failed_phase": 40, "phase": 40}
BUILD_ERROR_LIMITS = {"message": 500, "log": 4000}
MAX_DIAGNOSTICS, DIAGNOSTIC_CHARS = 20, 300


def _text(value, limit: int, tail: bool = False, extra_paths=()) -> str:
    """`value` as text with the host's paths and accounts replaced (`verifier.sandbox.host_text`), cut to
    `limit` characters (its tail when `tail`)."""
    from verifier.sandbox.host_text import scrub

    text = value if isinstance(value, str) else ("" if value is None else repr(value))
    text = scrub(text[-4 * limit - 1000:] if tail else text[:4 * limit + 1000], extra_paths)
    if len(text) <= limit:
        return text
    return ("..." + text[-limit:]) if tail else (text[:limit] + "...")


def bounded_report(report: dict, host_paths=()) -> dict:
    """The candidate's final report with every text field it controls cut to a fixed length (tracebacks
    and logs keep their tail), non-text values made text, build diagnostics capped in count and length,
    and the host's paths (`host_paths` besides the home and the project) and account names taken out."""
    out = dict(report)
    for key, limit in REPORT_LIMITS.items():
        if key in out:
            out[key] = _text(out[key], limit, tail=key == "traceback", extra_paths=host_paths)
    if "build_error" in out:
        be = out["build_error"] if isinstance(out["build_error"], dict) else {"message": out["build_error"]}
        diags = cast(list, be.get("diagnostics")) if isinstance(be.get("diagnostics"), list) else []
        out["build_error"] = {"message": _text(be.get("message"), BUILD_ERROR_LIMITS["message"], extra_paths=host_paths),
                              "log": _text(be.get("log"), BUILD_ERROR_LIMITS["log"], tail=True, extra_paths=host_paths),
                              "diagnostics": [_text(d, DIAGNOSTIC_CHARS, extra_paths=host_paths)
                                              for d in diags[:MAX_DIAGNOSTICS]]}
    return out


def _reached(marks: list, phase: str) -> bool:
    """The child marks "correctness" only after the candidate imported and built: a later hang or crash
    is not a compile failure even though no report was written."""
    return any(isinstance(m, dict) and m.get("phase") == phase for _, m in marks)


def _last_phase(marks: list) -> str:
    phases: list = [m.get("phase") for _, m in marks if isinstance(m, dict)]
    return {"profile": "while profiling", "latency": "while timing", "timing_start": "while timing",
            "timing_end": "while timing"}.get(phases[-1] if phases else "", "during the correctness trials")


def _no_report_reason(ev: Evidence, when: str) -> str:
    out = ev.outcome
    if out is None:
        return f"the candidate stopped {when} without a result"
    if out.timed_out:
        return f"the candidate {out.describe()} {when}"
    if out.signal is not None or out.exit_code not in (0, 3, None):
        return f"the candidate process {out.describe()} {when}"
    return f"the candidate exited {when} without a result (os._exit or sys.exit in the candidate?)"


SHARED_BUILD_NAMES = {"pch": "the precompiled header", "bind": "the Python bindings for a new signature"}


def build_timeout_hint(shared_builds: list[str], load: float | None = None, cores: int | None = None) -> str:
    """Why a build may have run out of time, as far as the trusted side knows it (issue 34: a cold first
    build in a fresh HOME on a busy 2-core machine timed out twice with nothing but "timed out"): the
    machine's shared parts it was also building (once per machine, or per signature) and the load."""
    import os

    parts = []
    names = [SHARED_BUILD_NAMES.get(k, k) for k in dict.fromkeys(shared_builds)]
    if names:
        parts.append("this verification was also building " + " and ".join(names)
                     + " (once per machine, kept once finished; `bash scripts/setup.sh` prebuilds them)")
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = None
    cores = cores or os.cpu_count() or 1
    if load is not None and load > cores:
        parts.append(f"the machine was busy (load {load:.1f} on {cores} cores): try again when it is quieter")
    return ("; " + "; ".join(parts)) if parts else ""


OUTPUT_TAIL_CHARS = 1500


def no_report_detail(ev: Evidence) -> dict:
    """What the process printed last, when it ended without a result: the one clue to a crash that left no
    report (a CUDA error, an allocator abort, a kernel's own message), bounded and scrubbed of host text."""
    tail = getattr(ev.outcome, "stderr_tail", "") if ev.outcome is not None else ""
    return {"output_tail": _text(tail, OUTPUT_TAIL_CHARS, tail=True)} if tail and tail.strip() else {}


class CorrectnessGate(Gate):
    """Trial outputs against the reference's, compared in the parent (see `compare_files`); this class
    words the failures where no outputs came back."""

    name = "correctness"

    def failure(self, ev: Evidence, start: float) -> GateResult:
        cand = ev.candidate
        if cand.get("phase") == "error":
            where = {"construct": "constructing ModelNew", "correctness": "running forward"}.get(
                cand.get("failed_phase"), cand.get("failed_phase", "running"))  # type: ignore[arg-type]  # None: the default
            return self._result(FAIL, start, f"{where} raised {cand.get('error_type')}: {cand.get('error', '')[:300]}",
                                traceback=cand.get("traceback", ""))
        return self._result(FAIL, start, _no_report_reason(ev, _last_phase(ev.marks)), **no_report_detail(ev))


def compare_files(cand_dir, ref_dir: Path, cand_outputs, ref_outputs: list[dict], atol: float | None, rtol: float | None,
                  config, label: str, after_digests: list | None = None, magnitude: bool = False,
                  scratch: ReadBuffer | None = None) -> dict:
    """One call's outputs (and its inputs after the call) against the reference's, from files.

    `cand_dir` is the `HeldDir` the trusted side created for this call (a plain path only in tests):
    every file in it is read through that descriptor, so a directory renamed and replaced by a link
    (to the reference's own files, say) changes nothing that is read; the descriptor must not be the
    reference's directory. Returns {"max_abs", "max_rel"} or {"fail": reason, ...}. Anything malformed
    in what the candidate claims or wrote (a missing file, a link, a FIFO, a wrong count, bad JSON) is
    a failure with one line, never an exception and never a blocked read.

    `scratch` (a run's `ReadBuffer`): the candidate's outputs are read into it, reused from trial to trial,
    and the reference's files (trusted, written once) are mapped, not read: a 256 MB output read with
    `np.load` faulted in 256 MB of fresh pages twice per trial (issue 33: the parent's system time was
    most of its 19 CPU seconds over a 256 MB ReLU's eleven forwards)."""
    try:
        with _dir_fd(cand_dir) as cfd, _dir_fd(ref_dir) as rfd:
            c_st, r_st = os.fstat(cfd), os.fstat(rfd)
            if (c_st.st_dev, c_st.st_ino) == (r_st.st_dev, r_st.st_ino):
                return {"fail": f"{label}: the candidate's folder is the reference's own (a swapped link?)"}
            return _compare_open(cfd, rfd, cand_outputs, ref_outputs, atol, rtol, config, label, after_digests,
                                 magnitude, scratch)
    except Exception as exc:  # noqa: BLE001 - whatever the candidate's files do, a failure with one line
        return {"fail": f"{label}: the candidate's results were malformed ({type(exc).__name__}: {str(exc)[:300]})"}


def _compare_open(cfd: int, rfd: int, cand_outputs, ref_outputs: list[dict], atol: float | None, rtol: float | None, config,
                  label: str, after_digests: list | None, magnitude: bool = False,
                  scratch: ReadBuffer | None = None) -> dict:
    if not isinstance(cand_outputs, list) or len(cand_outputs) != len(ref_outputs):
        n = len(cand_outputs) if isinstance(cand_outputs, list) else 0
        return {"fail": f"{label}: forward returned {n} outputs, expected {len(ref_outputs)}"}
    worst_abs = worst_rel = 0.0
    for j, (ro, co) in enumerate(zip(ref_outputs, cand_outputs, strict=True)):
        if scratch is None:
            want, ref_size = _load_fd(rfd, ro["file"], config)
        else:
            want, ref_size = _map_fd(rfd, ro["file"], config)
        # never more than a few times the reference's file: a sparse file claiming gigabytes costs the
        # candidate nothing and the parent its memory
        if scratch is None:
            got, _ = _load_fd(cfd, str(co["file"]), config, max_bytes=8 * ref_size + 65536)
        else:
            got = _read_into(cfd, str(co["file"]), config, 8 * ref_size + 65536, scratch)
        spread = output_spread(want) if getattr(config, "degenerate", None) else None
        cmp = compare_tensor(got, want, str(co["dtype"]), ro["dtype"], atol, rtol, f"output {j}", spread=spread,
                             magnitude=magnitude)
        worst_abs, worst_rel = max(worst_abs, cmp.max_abs), max(worst_rel, cmp.max_rel)
        if not cmp.ok:
            return {"fail": f"{label}: {cmp.reason}", "mismatch": cmp.mismatch, "max_abs": cmp.max_abs,
                    "max_rel": cmp.max_rel}
        if co.get("aliases_input") and not ro.get("aliases_input"):
            return {"fail": f"{label}: output {j} aliases an input; return a new tensor"}
    if after_digests is not None:
        from verifier.sandbox.job_dir import digest_fd, read_json

        cands = read_json(cfd, "after.json")
        if not isinstance(cands, list) or len(cands) != len(after_digests):
            n = len(cands) if isinstance(cands, list) else 0
            return {"fail": f"{label}: forward was given {len(after_digests)} inputs, the report has {n}"}
        for j, (digest, ci) in enumerate(zip(after_digests, cands, strict=True)):
            if digest is None:
                continue
            fd, st = _open_checked(cfd, str(ci["tensor"]["file"]), config)
            try:
                if digest_fd(fd, st.st_size, scratch.chunk() if scratch is not None else None) != digest:
                    return {"fail": f"{label}: input {j} was modified by forward; inputs must stay unchanged"}
            finally:
                os.close(fd)
    return {"max_abs": worst_abs, "max_rel": worst_rel}


@contextlib.contextmanager
def _dir_fd(directory):
    """The descriptor of a held directory (borrowed), or of a trusted path opened without following a
    link in its last step (closed afterwards)."""
    if directory is None:
        raise ValueError("no folder to read")
    held = getattr(directory, "fd", None)
    if held is not None:
        if held < 0:
            raise ValueError(f"{directory.name} was already closed")
        yield held
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def _open_checked(dir_fd: int, name: str, config, expected: dict | None = None, max_bytes: int | None = None):
    """(descriptor, stat) of the regular file `name` in `dir_fd` (see `jobfiles.open_regular`: no link,
    FIFO, socket or device, opened without blocking), no larger than the memory limit or `max_bytes`,
    and, with `expected`, the very file the reference run wrote."""
    from verifier.sandbox.job_dir import open_regular

    fd, st = open_regular(dir_fd, name)
    try:
        if expected is not None and expected.get(name) != file_identity(st):  # also when the record is missing
            raise ValueError(f"the reference file {name} changed after the reference run wrote it")
        if st.st_size > config.memory_gb * 1024**3:
            raise ValueError(f"{name} is larger than the memory limit")
        if max_bytes is not None and st.st_size > max_bytes:
            raise ValueError(f"{name} holds {st.st_size} bytes, far more than the reference's output")
    except BaseException:
        os.close(fd)
        raise
    return fd, st


def _load_fd(dir_fd: int, name: str, config, expected: dict | None = None,
             max_bytes: int | None = None) -> tuple[np.ndarray, int]:
    """One .npy file read from its descriptor (never a pickle, never an archive), with its size."""
    fd, st = _open_checked(dir_fd, name, config, expected, max_bytes)
    with os.fdopen(fd, "rb") as fh:
        arr = np.load(fh, allow_pickle=False)
    if not isinstance(arr, np.ndarray):
        raise ValueError(f"{name} is not a .npy array")
    return arr, st.st_size


class ReadBuffer:
    """Host memory one verification reads the candidate's output files into, reused from trial to trial
    (`_read_into`): grown to the largest file read, dropped with the run (`close`). What was read last is
    valid until the next read."""

    CHUNK = 1 << 22  # the digest's read size (`verifier.sandbox.job_dir.digest_fd`)

    def __init__(self) -> None:
        self._buf: np.ndarray | None = None
        self._chunk: bytearray | None = None

    def take(self, nbytes: int) -> memoryview:
        """`nbytes` of the buffer (grown when smaller), as writable bytes."""
        if self._buf is None or self._buf.nbytes < nbytes:
            self._buf = None  # the old one freed before the larger is allocated
            self._buf = np.empty(max(1, nbytes), dtype=np.uint8)
        return memoryview(self._buf)[:nbytes]  # type: ignore[arg-type]  # ndarray is a buffer (__buffer__ stubbed for 3.12+)

    def chunk(self) -> bytearray:
        if self._chunk is None:
            self._chunk = bytearray(self.CHUNK)
        return self._chunk

    def close(self) -> None:
        self._buf = self._chunk = None


def _npy_header(fh, name: str) -> tuple[tuple, bool, np.dtype]:
    """(shape, fortran order, dtype) of a .npy file at its start, refusing versions this reader does not
    know and Python objects."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"{name} is not a .npy file this reader knows (version {version})")
    if dtype.hasobject:
        raise ValueError(f"{name} holds Python objects")
    return shape, fortran, dtype


def _read_into(dir_fd: int, name: str, config, max_bytes: int, scratch: ReadBuffer) -> np.ndarray:
    """A candidate's .npy file (checked as `_load_fd`: a regular file, no link, within the limits) read
    into `scratch`: a view of it, valid until the next read. A file shorter than its header says (cut
    while it was read, say) is a failure, never a partly stale array."""
    fd, st = _open_checked(dir_fd, name, config, None, max_bytes)
    with os.fdopen(fd, "rb", buffering=0) as fh:
        shape, fortran, dtype = _npy_header(fh, name)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if fh.tell() + nbytes > st.st_size:
            raise ValueError(f"{name} is shorter than its header says")
        view = scratch.take(nbytes)
        got = 0
        while got < nbytes:
            n = fh.readinto(view[got:])
            if not n:
                raise ValueError(f"{name} is shorter than its header says")
            got += n
    arr = np.frombuffer(view, dtype=dtype, count=count) if count else np.zeros(0, dtype=dtype)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def _map_fd(dir_fd: int, name: str, config) -> tuple[np.ndarray, int]:
    """A trusted .npy file (written once by the reference worker, in a directory the candidate cannot
    reach) mapped read-only with its pages populated up front, and its size: no copy, no fresh pages."""
    import mmap

    fd, st = _open_checked(dir_fd, name, config)
    try:
        with os.fdopen(os.dup(fd), "rb", buffering=0) as fh:
            shape, fortran, dtype = _npy_header(fh, name)
            offset = fh.tell()
        count = math.prod(shape)
        if offset + dtype.itemsize * count > st.st_size:
            raise ValueError(f"{name} is shorter than its header says")
        if count == 0:
            return np.zeros(shape, dtype=dtype), st.st_size
        mapped = mmap.mmap(fd, st.st_size, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                           prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    arr = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset)
    return (arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)), st.st_size


def _load(directory, name: str, config, expected: dict | None = None,
          max_bytes: int | None = None) -> np.ndarray:
    """One .npy file of `directory` (a held directory or a trusted path), refusing links, anything but a
    regular file, and files too large (a candidate must not point the comparison at files of its
    choosing, nor make the parent block or run out of memory), read from the descriptor that was
    checked; never a pickle."""
    with _dir_fd(directory) as dfd:
        return _load_fd(dfd, name, config, expected, max_bytes)[0]


def _map(directory, name: str, config, max_bytes: int | None = None) -> np.ndarray:
    """One .npy file of a trusted directory mapped read-only instead of read (checked as `_load`, never a
    pickle): the timed rounds' checks compare every call's outputs with the reference's, and reading
    each 2 MB output into a fresh array cost more than the comparison. Only for files the trusted side
    wrote and no one changes while they are mapped."""
    with _dir_fd(directory) as dfd:
        fd, st = _open_checked(dfd, name, config, None, max_bytes)
        with os.fdopen(fd, "rb") as fh:
            shape, fortran, dtype = _npy_header(fh, name)
            offset = fh.tell()
            if offset + dtype.itemsize * math.prod(shape) > st.st_size:
                raise ValueError(f"{name} is shorter than its header says")
            if math.prod(shape) == 0:
                return np.zeros(shape, dtype=dtype)
            return np.memmap(fh, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")


def file_identity(st) -> list[int]:
    """Inode, size and modification time: any replace, rename or rewrite of the file changes one of them."""
    return [st.st_ino, st.st_size, st.st_mtime_ns]


class ProfileGate(Gate):
    """Top ops by self time from torch.profiler: feedback for the refine stage, never a failure."""

    name = "profile"

    def evaluate(self, ev: Evidence) -> GateResult:
        start = time.monotonic()
        prof = ev.candidate.get("profile")
        if not prof:
            return self._result(SKIP, start, "no profile was recorded")
        return self._result(PASS, start, "", top_ops=prof[:10], reference_top_ops=ev.reference.get("profile", [])[:10])
