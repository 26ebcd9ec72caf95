"""The run-time defences on their own: hostile candidates with the static scan switched off.

Each candidate here would be stopped early by the static rules; these tests turn them off
(`static_scan=False`) so what is tested is the OS isolation, the trusted side's ownership of state,
fresh inputs with sampled checks during timing, plain-tensor outputs and the binary audit. The last
test runs an honest kernel after all of them on the same build root and checks that nothing stuck.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from verifier import verify

pytestmark = pytest.mark.slow

PREAMBLE = '''import os, sys, glob, time, subprocess
from pathlib import Path
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
'''

RELU_EXT = '''
CPP = r"""
#include <torch/extension.h>
torch::Tensor kernel_forward(torch::Tensor x) {
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""
_ext = load_inline(name="evk_test_shared", cpp_sources=[CPP], functions=["kernel_forward"],
                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
'''

PLAIN_MODEL = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.kernel_forward(x)
'''


def candidate(body: str, model: str = PLAIN_MODEL) -> str:
    return PREAMBLE + RELU_EXT + body + model


def _tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.endswith(".lock"):
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


@pytest.fixture()
def hostile_config(make_config):
    return lambda **kw: make_config(static_scan=False, **kw)


def test_a_write_outside_the_job_directory_fails(task_source, hostile_config, tmp_path, build_root):
    """Isolation is really on: the person's files, the build root and the project tree cannot be written."""
    targets = [tmp_path / "victim.txt", build_root / "verdicts" / "forged.json",
               Path(__file__).resolve().parents[2] / "evil.txt", Path.home() / "evk-evil.txt"]
    body = f'''
RESULTS = []
for target in {[str(t) for t in targets]!r}:
    try:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text("pwned")
        RESULTS.append("wrote " + target)
    except OSError as exc:
        RESULTS.append(type(exc).__name__)
'''
    res = verify(task_source("relu"), candidate(body), config=hostile_config())
    for t in targets:
        assert not t.exists(), t
    assert res.feasible, res.feedback()  # every write failed, so the kernel itself ran normally


def test_forged_verdict_in_the_cache_is_not_believed(task_source, hostile_config, build_root):
    """The verdict cache is invisible to the sandbox; a verdict forged from outside without the key
    is ignored (and removed) instead of being returned."""
    import json

    from verifier.api import _verdict_key
    from verifier.backends import get_backend

    source = candidate("raise RuntimeError('no kernel here')\n")
    config = hostile_config(use_cache=True)
    key = _verdict_key(task_source("relu"), source, get_backend("cpu"), config)
    forged = build_root / "verdicts" / f"{key}.json"
    forged.parent.mkdir(parents=True, exist_ok=True)
    fake = {"backend": "cpu", "gates": [{"name": n, "status": "pass"} for n in
                                        ("anti_hacking", "compile", "correctness", "latency", "profile")],
            "latency_ms": 0.0001, "reference_ms": 12.0}
    forged.write_text(json.dumps({"payload": json.dumps({"verdict": fake, "stored_at": time.time()}), "hmac": "0" * 64}))
    res = verify(task_source("relu"), source, config=config)
    assert not res.feasible and not res.cached
    second = verify(task_source("relu"), source, config=config)
    assert not second.feasible


def test_shared_build_artefacts_cannot_be_poisoned(task_source, hostile_config, build_root, kernel_source):
    """The trusted precompiled headers and bindings are read-only inside: editing the header text
    and truncating its .gch fail, and no file can be added beside them (a header the next build would
    pick up first), so later kernels build against the trusted ones.

    Only what the candidate could have touched is compared: every finished artefact that was there before
    it ran (content-keyed, so a rebuild by another test never changes one), and the files it tried to add.
    Another pytest worker builds into the same root meanwhile (its `*.tmp*` files come and go, new keys
    appear): a digest of the whole tree failed on those, not on the candidate."""
    from tests.verifier.conftest import RELU_BODY

    honest = verify(task_source("relu"), kernel_source(RELU_BODY), config=hostile_config())
    assert honest.feasible, honest.feedback()
    shared = build_root / "shared"
    before = {k: v for k, v in _tree_digest(shared).items() if ".tmp" not in Path(k).name}
    assert any(k.endswith(".gch") for k in before), before
    planted = f"evk-planted-{uuid.uuid4().hex}"
    body = f'''
for p in glob.glob({str(shared)!r} + "/**/*", recursive=True):
    try:
        if p.endswith(".gch"):
            os.truncate(p, 0)
        elif p.endswith((".h", ".cpp")):
            Path(p).write_text('#error poisoned')
        elif p.endswith(".o"):
            Path(p).write_bytes(b"")
    except OSError:
        pass
    try:
        if os.path.isdir(p):
            Path(p, {planted!r} + ".h").write_text('#error planted')
    except OSError:
        pass
'''
    verify(task_source("relu"), candidate(body), config=hostile_config())
    after = _tree_digest(shared)
    assert {k: after.get(k) for k in before} == before
    assert not [k for k in after if planted in k], "the candidate added files to the shared build root"


def test_the_answer_cannot_be_read(task_source, hostile_config):
    """Reference outputs and seeds are not in the sandbox: a candidate that looks for them in every
    place it can see, and otherwise returns zeros, is wrong."""
    body = '''
FOUND = [p for pat in ("/dev/shm/**/*.npy", "/tmp/**/*.npy", "/run/**/*.npy", "/var/tmp/**/*.npy",
                        os.path.dirname(os.getcwd()) + "/**/*.npy", os.path.dirname(os.getcwd()) + "/../**/*.npy")
         for p in glob.glob(pat, recursive=True)]
'''
    model = '''
class ModelNew(nn.Module):
    def forward(self, x):
        import numpy as np
        for f in FOUND:
            arr = torch.from_numpy(np.load(f))
            if arr.shape == x.shape:
                return arr
        return _ext.kernel_forward(x) * 0
'''
    res = verify(task_source("relu"), candidate(body, model), config=hostile_config())
    assert not res.feasible
    assert res.failed_gate.name in ("correctness", "anti_hacking"), res.feedback()


def test_precomputing_with_predictable_seeds_fails(task_source, hostile_config):
    """Trial inputs come from seeds drawn fresh per verification: the reference re-imported from the
    project tree and run at import on the old fixed seeds gives answers for other inputs."""
    body = '''
ANSWERS = []
try:
    from core.builtin_tasks import relu as task
    for i in range(5):
        torch.manual_seed(42 + 1009 * i)
        ANSWERS.append(task.Model()(*task.get_inputs()))
except Exception:
    pass
CALLS = [0]
'''
    model = '''
class ModelNew(nn.Module):
    def forward(self, x):
        i = CALLS[0]
        CALLS[0] += 1
        if ANSWERS:
            return _ext.kernel_forward(ANSWERS[i % len(ANSWERS)])
        return _ext.kernel_forward(x) + 1
'''
    res = verify(task_source("relu"), candidate(body, model), config=hostile_config())
    assert not res.feasible
    assert res.failed_gate.name == "correctness", res.feedback()


MEMO_MODELS = {
    "data_ptr": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = _ext.kernel_forward(x)
        return self.memo[key]
''',
    "version": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
    def forward(self, x):
        key = (x.data_ptr(), x._version)
        if len(self.memo) > 2 and key not in self.memo:
            return next(iter(self.memo.values()))
        if key not in self.memo:
            self.memo[key] = _ext.kernel_forward(x)
        return self.memo[key]
''',
    "checksum": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}
        self.last = None
    def forward(self, x):
        flat = x.reshape(-1)
        key = (float(flat[0]), float(flat[-1]))
        if key not in self.memo:
            if len(self.memo) >= 6:
                return self.last
            self.memo[key] = _ext.kernel_forward(x)
            self.last = self.memo[key]
        return self.memo[key]
''',
    "stale_after_n": '''
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.last = None
    def forward(self, x):
        self.calls += 1
        if self.calls <= 16 or self.last is None:
            self.last = _ext.kernel_forward(x)
        return self.last
''',
}


@pytest.mark.alone
@pytest.mark.parametrize("trick", sorted(MEMO_MODELS))
def test_memoised_or_stale_outputs_fail_during_timing(trick, task_source, hostile_config):
    """Every timed call gets fresh content in the same buffers and sampled timed outputs are checked:
    caches keyed by pointer, version or a checksum, and "stale after N calls", are caught."""
    # the timed-output checks themselves: skipping the kernel on a memoised call is its own rule, allowed here
    res = verify(task_source("relu"), candidate("", MEMO_MODELS[trick]), config=hostile_config(timing="full", allow=["custom-kernel-skipped"]))
    assert not res.feasible, (trick, res.feedback())
    gate = res.failed_gate
    assert gate.name in ("anti_hacking", "correctness"), res.feedback()
    if gate.name == "correctness" and gate.detail.get("during") == "timing":
        assert "afresh" in gate.reason and "timed call" in gate.reason, gate.reason
    if trick == "stale_after_n":  # right for the first 16 calls (past every correctness call): only the checks on timed calls can see it
        assert gate.name == "correctness" and gate.detail.get("during") == "timing", res.feedback()


def test_tensor_subclass_output_is_refused(task_source, hostile_config):
    """A lazy Tensor subclass would compute when the harness reads it, outside the timer."""
    model = '''
class Lazy(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})

class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.kernel_forward(x).as_subclass(Lazy)
'''
    res = verify(task_source("relu"), candidate("", model), config=hostile_config())
    assert not res.feasible
    assert "plain torch.Tensor" in res.feedback() or "subclass" in res.feedback(), res.feedback()


def _marked_processes(marker: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    out.append(int(entry))
            except OSError:
                pass
    return out


def test_fork_chain_leaves_no_process(task_source, hostile_config):
    """Processes started by the candidate, however they detach, die with its namespace."""
    marker = f"evk-forkchain-{os.getpid()}-{time.monotonic_ns()}"
    body = f'''
for _ in range(3):
    subprocess.Popen(["/bin/sh", "-c", "(sleep 300; echo {marker}) & (sleep 300; echo {marker}) &"
                      " exec sleep 300 # {marker}"], start_new_session=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["/bin/sleep", "300", "{marker}"])
        os._exit(0)
'''
    verify(task_source("relu"), candidate(body), config=hostile_config())
    deadline = time.monotonic() + 5
    while _marked_processes(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked_processes(marker) == []


def test_memory_bank_and_sessions_are_invisible(task_source, hostile_config):
    """The person's memory bank and sessions are not in the sandbox at all, not just read-only."""
    bank = Path(os.environ["EVOKERNEL_MEMORY"])
    bank.parent.mkdir(parents=True, exist_ok=True)
    bank.write_text('{"items": {}}')
    before = bank.read_bytes()
    body = f'''
VISIBLE = os.path.exists({str(bank)!r}) or os.path.exists({os.environ["EVOKERNEL_SESSIONS"]!r})
if VISIBLE:
    raise SystemExit("the memory bank is visible")
'''
    res = verify(task_source("relu"), candidate(body), config=hostile_config())
    assert res.feasible, res.feedback()
    assert bank.read_bytes() == before


def test_blas_through_the_binary_is_found(task_source, hostile_config):
    """The C++ calls MKL/OpenBLAS under a macro alias: the text says nothing, the binary imports it."""
    body = '''
CPP2 = r"""
#include <torch/extension.h>
#define GEMM_NAME cblas_sgemm
extern "C" void GEMM_NAME(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
torch::Tensor blas_forward(torch::Tensor x) {
    auto out = torch::empty_like(x);
    if (x.numel() < 0) GEMM_NAME(0, 0, 0, 0, 0, 0, 1.f, nullptr, 0, nullptr, 0, 0.f, nullptr, 0);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
}
"""
_blas = load_inline(name="evk_test_blas", cpp_sources=[CPP2], functions=["blas_forward"],
                    extra_cflags=["-O3"], extra_ldflags=["-Wl,--unresolved-symbols=ignore-all"])
'''
    model = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _blas.blas_forward(x.contiguous())
'''
    res = verify(task_source("relu"), candidate(body, model), config=hostile_config(policy="strict"))
    assert not res.feasible
    gate = res.failed_gate
    assert gate.name in ("anti_hacking", "compile"), res.feedback()
    if gate.name == "anti_hacking":
        assert "cblas_sgemm" in str(gate.detail) or "cblas_sgemm" in gate.reason, gate.detail


def test_compiler_wrapper_splicing_in_aten_work_is_found_in_the_binary(task_source, hostile_config):
    """`CXX` set to a wrapper that splices hidden source into the kernel's translation unit: the source
    the parent scanned is clean, but the built object imports an ATen operator, and the audit reads that."""
    body = r'''
Path("/tmp/evil.cpp").write_text("\nstatic int evk_hidden = [](){ auto a = at::ones({2, 2}); "
                                 "return (int) at::matmul(a, a).numel(); }();\n")
Path("/tmp/cxx-wrap.sh").write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in *kernel.cpp) cat /tmp/evil.cpp >> "$a";; esac; done\n'
                                    'exec c++ "$@"\n')
os.chmod("/tmp/cxx-wrap.sh", 0o755)
os.environ["CXX"] = "/tmp/cxx-wrap.sh"
'''
    source = PREAMBLE + body + RELU_EXT + PLAIN_MODEL
    res = verify(task_source("relu"), source, config=hostile_config(policy="strict"))
    assert not res.feasible, res.feedback()
    gate = res.failed_gate
    assert gate.name == "anti_hacking", res.feedback()
    assert "binary-library" in str(gate.detail) and "matmul" in str(gate.detail), gate.detail


def test_private_tmp_cannot_eat_the_machines_memory(task_source, hostile_config):
    """tmpfs pages are RAM that no address-space limit counts: each private tmpfs has a size cap."""
    body = """
WRITTEN = {}
for place in ("/tmp", "/dev/shm", "/var/tmp"):
    n = 0
    try:
        with open(place + "/fill", "wb") as fh:
            for _ in range(24):
                fh.write(b"x" * (8 << 20))
                fh.flush()
                n += 8
    except OSError:
        pass
    WRITTEN[place] = n
if max(WRITTEN.values()) > 64:
    raise SystemExit(f"wrote past the cap: {WRITTEN}")
"""
    res = verify(task_source("relu"), candidate(body), config=hostile_config(sandbox_tmp_mb=64))
    assert res.feasible, res.feedback()


@pytest.mark.alone
def test_forged_timings_are_bounded_by_the_parents_clock(task_source, hostile_config):
    """The candidate owns its process: it rewrites the harness's timing marks (here through the channel
    object it finds with gc) to claim 50x less time than a deliberately slow kernel takes. The parent's
    own clock over each round, less the trusted stub, is the figure; the forged per-call times are only
    diagnostics (without this the kernel read as faster than the reference)."""
    slow = RELU_EXT.replace("for (int64_t i = 0;", "for (int rep = 0; rep < 8; ++rep) for (int64_t i = 0;")
    body = """
import gc
from verifier.sandbox.channel import Channel
for obj in gc.get_objects():
    if isinstance(obj, Channel):
        def forged(phase, _real=obj.mark, **extra):
            if phase == "timing_end":
                extra["times_ms"] = [t / 50 for t in extra["times_ms"]]
            return _real(phase, **extra)
        obj.mark = forged
"""
    res = verify(task_source("relu"), PREAMBLE + slow + body + PLAIN_MODEL, config=hostile_config(timing="full"))
    assert res.feasible, res.feedback()  # the outputs are right; only the speed claim is false
    # the speed figure is the parent's clock (the attested clock); the forged report is on record
    assert any("the parent's clock was used" in n for n in res.notes), res.notes
    assert res.speedup is not None and res.speedup < 1.0, (res.speedup, res.notes)


@pytest.mark.alone
def test_a_view_of_the_input_during_timing_fails(task_source, make_config):
    """With the static scan on: the C++ transposes for real on a new input, but on a repeated input
    pointer (the timing loop refills the same buffers) returns a strided view of its input, which costs
    nothing and is right when copied at once. Outputs are copied only after their inputs were
    overwritten, so the view shows other data and the sampled check fails (it read ~150x before)."""
    source = (Path(__file__).resolve().parents[1] / "candidates" / "hostile_dynamic" / "cpp_view_in_timing.py").read_text()
    # several calls per round, so the refilled buffers repeat within a round whatever the allocator does
    # the timing check, not the probes: with one allocator setting for both sides (heap blocks reused at the
    # same address) the magnitude probe's trial can already meet a repeated pointer and refuse the view
    res = verify(task_source("transpose_copy"), source, config=make_config(timing="full", round_target_ms=400.0, timing_memory_mb=1024.0,
                                                                    shape_probe=False, magnitude_probe=False))
    assert not res.feasible, (res.speedup, res.feedback())
    gate = res.failed_gate
    # the trials draw each call's inputs into the last one's tensors (issue 33's memory plan), so the
    # repeated pointer comes already in the trials and the view is refused there, before any timing
    assert gate.name == "correctness", res.feedback()
    if gate.detail.get("during") == "timing":
        assert "view of its inputs" in gate.reason, gate.reason
    else:
        assert "aliases an input" in gate.reason, gate.reason


def test_a_kernel_that_lets_aten_copy_do_the_work_fails(task_source, make_config):
    """With the static scan on: the C++ re-strides its input and returns `.contiguous()` of that, so
    ATen's copy (an allowed entry point for the binary audit) does the whole transpose. The copy's
    time counts as torch work in the profile's split (it was accepted before)."""
    source = (Path(__file__).resolve().parents[1] / "candidates" / "hostile_dynamic" / "cpp_aten_copy_transpose.py").read_text()
    res = verify(task_source("transpose_copy"), source, config=make_config(policy="strict", shape_probe=False))
    assert not res.feasible, res.feedback()
    gate = res.failed_gate
    assert gate.name == "anti_hacking" and gate.detail.get("rule") == "torch-work-outside-kernel", res.feedback()
    assert "aten::copy_" in gate.reason, gate.reason


def test_endless_output_keeps_only_a_tail(task_source, hostile_config):
    """300 MB on stdout: only a tail is kept outside the sandbox (the whole stream went to a file on the
    parent's side, under the run directory on /dev/shm, bounded only by the file-size limit)."""
    from verifier.api import _scratch

    body = """
chunk = "x" * (1 << 20) + "\\n"
for _ in range(300):
    sys.stdout.write(chunk)
sys.stdout.flush()
"""
    biggest = [0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for f in (_scratch() / "runs").glob("run-*/*.stderr"):
                with contextlib.suppress(OSError):
                    biggest[0] = max(biggest[0], f.stat().st_size)
            time.sleep(0.02)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        res = verify(task_source("relu"), candidate(body), config=hostile_config())
    finally:
        done.set()
        watcher.join()
    assert res.feasible, res.feedback()
    assert biggest[0] < 1 << 20, biggest[0]


@pytest.mark.alone
def test_a_flood_of_marks_ends_the_run(task_source, hostile_config):
    """Marks written straight to the progress descriptor, 1 MB each without end: the parent stops reading
    past its budget and ends the job instead of keeping every line in memory."""
    body = """
fd = int(os.environ["EVK_PROGRESS_FD"])
line = ('{"phase": "noise", "pad": "' + "a" * (1 << 20) + '"}\\n').encode()
for _ in range(400):
    os.write(fd, line)
"""
    started = time.monotonic()
    res = verify(task_source("relu"), candidate(body), config=hostile_config())
    assert not res.feasible
    assert time.monotonic() - started < 60, res.feedback()


@pytest.mark.alone
def test_honest_kernel_after_all_hostile_runs(task_source, make_config, kernel_source, build_root):
    """After every hostile candidate above ran on this build root, an honest kernel gets a clean,
    feasible verdict with a sane speedup, and no sandbox process is left behind."""
    from tests.verifier.conftest import RELU_BODY

    res = verify(task_source("relu"), kernel_source(RELU_BODY + "\n// after hostile runs"), config=make_config())
    assert res.feasible, res.feedback()
    assert res.speedup is not None and 0.01 < res.speedup < 100
    assert not any("bwrap" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")
                   for p in _marked_processes("verifier.workers.harness") if Path(f"/proc/{p}").exists()
                   and "--wait" not in Path(f"/proc/{p}/cmdline").read_text(errors="replace"))


def test_unavailable_isolation_refuses_in_one_line(monkeypatch, task_source, make_config):
    """No silent downgrade: without namespaces, verify says so and what to pass instead."""
    import verifier.sandbox.isolation as iso
    from verifier.api import VerifierError

    monkeypatch.setattr(iso, "unavailable_reason", lambda: "bubblewrap is not installed: pass --unsafe-no-isolation")
    with pytest.raises(VerifierError, match="--unsafe-no-isolation"):
        verify(task_source("relu"), "x = 1\n", config=make_config())


def test_unisolated_verdicts_say_so(task_source, make_config, kernel_source):
    from tests.verifier.conftest import RELU_BODY

    res = verify(task_source("relu"), kernel_source(RELU_BODY + "\n// unisolated"),
                 config=make_config(isolate=False))
    assert res.feasible and not res.isolated
    assert any("unisolated" in n for n in res.notes)
    assert "unisolated" in res.timing_label()


def test_sandbox_runs_as_an_ordinary_user(tmp_path):
    """bubblewrap works for a user without privileges (the tests usually run as root)."""
    import pwd

    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv, bwrap_binary, write_synthetic_etc

    if os.getuid() != 0:
        pytest.skip("already an ordinary user: the other tests cover it")
    try:
        user = pwd.getpwnam("evk")
    except KeyError:
        pytest.skip("no ordinary user `evk` on this machine (useradd evk to run this test)")
    import shutil
    import tempfile

    if not all(os.access(p, os.X_OK) for p in Path(bwrap_binary()).parents if str(p) != "/"):
        pytest.skip("the bwrap binary lies where an ordinary user cannot reach it")
    base = Path(tempfile.mkdtemp(prefix="evk-user-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    job = base / "job"
    job.mkdir()
    os.chown(job, user.pw_uid, user.pw_gid)
    system = [Path(d) for d in ("/usr", "/etc") if Path(d).is_dir()]
    etc = write_synthetic_etc(base, user.pw_uid, user.pw_gid)  # as the user's own app writes them
    argv = bwrap_argv(SandboxSpec(writable=[job], etc_dir=etc),
                      ["/bin/sh", "-c", "touch ok && ! touch /etc/evk-evil && id -u"], trees=system)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: (os.setgid(user.pw_gid), os.setuid(user.pw_uid)))
    try:
        assert proc.returncode == 0, proc.stderr
        assert (job / "ok").exists() and not Path("/etc/evk-evil").exists()
        assert proc.stdout.strip() == str(user.pw_uid)
    finally:
        shutil.rmtree(base, ignore_errors=True)
