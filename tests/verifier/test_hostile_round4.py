"""The fourth held-out hostile round (issue 37): candidates that won against the old code, and the
defences that now stop them.

* A helper in a nested user + PID namespace (raw `clone` from inline assembly) hid from the pause that
  freezes the sandbox before its outputs are read: bubblewrap now runs with `--disable-userns` and a
  seccomp filter (`verifier.sandbox.syscall_filter`), and the pause stops every descendant of the sandbox
  whatever its namespace.
* Host facts in a verdict: `/etc/passwd` raised as an error carried the host's accounts and homes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from verifier import verify

ROUND4 = Path(__file__).resolve().parents[1] / "candidates" / "hostile_round4"

PROBE = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def sc(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    return r if r >= 0 else -ctypes.get_errno()
NEWUSER, NEWPID = 0x10000000, 0x20000000
print("unshare", sc(272, NEWUSER | NEWPID))
print("clone", sc(56, NEWUSER | NEWPID | 17, 0, 0, 0, 0))
print("clone3", sc(435, 0, 0))
print("setns", sc(308, 0, 0))
print("ptrace", sc(101, 16, 1, 0, 0))
print("bpf", sc(321, 0, 0, 0))
print("userfaultfd", sc(323, 0))
print("personality", sc(135, 0x0040000))
print("personality_query", 0 if sc(135, 0xffffffff) >= 0 else -1)
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
'''


def _run_probe(job: Path, user=None) -> str:
    """Run PROBE in a sandbox with the filter (as `user` when given); its stdout."""
    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv, write_synthetic_etc
    from verifier.sandbox.syscall_filter import filter_fd

    (job / "probe.py").write_text(PROBE)
    fd = filter_fd()
    if fd is None:
        pytest.skip("no seccomp table for this architecture")
    trees = [Path(d) for d in ("/usr", "/etc") if Path(d).is_dir()]
    etc = None if user is None else write_synthetic_etc(job.parent, user.pw_uid, user.pw_gid)
    argv = bwrap_argv(SandboxSpec(writable=[job], etc_dir=etc), ["/usr/bin/python3", str(job / "probe.py")],
                      trees=trees, seccomp_fd=fd)
    drop = None if user is None else (lambda: (os.setgid(user.pw_gid), os.setuid(user.pw_uid)))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, pass_fds=(fd,), preexec_fn=drop)
    finally:
        os.close(fd)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _probe(job: Path, user=None) -> dict[str, int]:
    job.mkdir(exist_ok=True)
    if user is not None:
        os.chown(job, user.pw_uid, user.pw_gid)
    out = _run_probe(job, user)
    return {k: int(v) for k, v in (line.split() for line in out.splitlines())}


def _check_filtered(seen: dict[str, int]) -> None:
    import errno

    for call in ("unshare", "clone", "setns", "ptrace", "bpf", "userfaultfd", "personality"):
        assert seen[call] == -errno.EPERM, (call, seen)
    assert seen["clone3"] == -errno.ENOSYS  # so that libc falls back to clone, whose flags the filter reads
    assert seen["personality_query"] == 0 and seen["fork"] == 7  # what a kernel needs still works


def test_syscall_filter_denies_nested_namespaces(tmp_path):
    """unshare / clone with namespace flags / setns / ptrace / bpf ... are EPERM inside the sandbox."""
    if not Path("/usr/bin/python3").exists():
        pytest.skip("no system python3")
    _check_filtered(_probe(tmp_path / "job"))


def test_syscall_filter_as_an_ordinary_user(tmp_path):
    import pwd

    if os.getuid() != 0:
        _check_filtered(_probe(tmp_path / "job"))
        return
    import shutil
    import tempfile

    try:
        user = pwd.getpwnam("evk")
    except KeyError:
        pytest.skip("no ordinary user `evk` (useradd -m evk)")
    base = Path(tempfile.mkdtemp(prefix="evk-seccomp-", dir="/tmp"))  # pytest's tmp_path is root's alone
    try:
        os.chmod(base, 0o755)
        _check_filtered(_probe(base / "job", user))
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_bwrap_disables_user_namespaces():
    from verifier.sandbox.isolation import _namespace_args, _userns_args

    if not _userns_args():
        pytest.skip("bubblewrap cannot make a user namespace here (nor can a candidate)")
    assert "--disable-userns" in _namespace_args() and "--unshare-user" in _namespace_args()


def test_pause_covers_every_descendant_of_the_sandbox():
    """The pause stops the sandbox's whole process tree, not only the harness's PID namespace."""
    import time

    from verifier.run.timed_calls import sandbox_pids

    outer = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & sleep 60 & wait"])
    try:
        deadline = time.monotonic() + 5
        while len(sandbox_pids(outer.pid, outer.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        pids = sandbox_pids(outer.pid, outer.pid)
        assert pids[0] == outer.pid and len(pids) == 3 and len(set(pids)) == 3
    finally:
        outer.kill()
        outer.wait()


@pytest.mark.slow
def test_nested_namespace_helper_is_refused(task_source, make_config):
    """Before: the raw clone made a helper in a nested user + PID namespace and the verdict was feasible
    (the helper lived on beside the paused sandbox). Now the clone is refused (EPERM from the filter)."""
    source = (ROUND4 / "cpp_nested_namespace.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=False))
    text = json.dumps(res.to_dict())
    assert not res.feasible, text[:2000]
    assert "NESTED-NAMESPACE-REFUSED errno=1" in text or "NESTED-NAMESPACE-REFUSED errno=28" in text


def _host_people() -> list[tuple[str, str, str]]:
    """(name, passwd line, home) of the host's accounts of people (uid 1000 and above)."""
    out = []
    for line in Path("/etc/passwd").read_text().splitlines():
        parts = line.split(":")
        if len(parts) >= 7 and parts[2].isdigit() and 1000 <= int(parts[2]) < 65534:
            out.append((parts[0], line, parts[5]))
    return out


def test_sandbox_sees_synthetic_account_files():
    from verifier.sandbox.isolation import synthetic_etc

    files = synthetic_etc(1234, 1234)
    assert "sandbox:x:1234:1234:" in files["passwd"] and "sandbox:x:1234:" in files["group"]
    assert files["hosts"].startswith("127.0.0.1 localhost")
    for name, _line, _home in _host_people():
        assert name not in files["passwd"]


def test_candidate_text_is_scrubbed_of_host_facts(tmp_path):
    from verifier.gates.evidence import bounded_report
    from verifier.sandbox.host_text import scrub

    project = str(Path(__file__).resolve().parents[2])
    cache = tmp_path / "cache-root"
    people = _host_people()
    text = f"{project}/verifier/api.py {Path.home()}/.ssh {cache}/builds/x " + " ".join(
        f"{line} {home}/notes" for _n, line, home in people)
    out = scrub(text, [cache])
    assert project not in out and str(cache) not in out and "<project>/verifier/api.py" in out
    for name, line, home in people:
        assert line not in out and home not in out and f":{name}:" not in out
    report = bounded_report({"error": text + "A" * 100000, "traceback": text}, [cache])
    assert len(report["error"]) < 400 and project not in report["error"] + report["traceback"]


@pytest.mark.slow
def test_passwd_raised_as_error_leaves_no_host_account_in_the_verdict(task_source, make_config):
    """Before: the host's /etc/passwd lines (accounts of people and their homes) were in the verdict."""
    source = (ROUND4 / "passwd_in_error.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=False))
    text = json.dumps(res.to_dict()) + res.feedback()
    assert not res.feasible
    assert "nologin" in text  # the candidate did read a passwd (the synthetic one)
    for name, line, home in _host_people():
        assert line not in text and home not in text and f"{name}:x:" not in text
    assert str(Path(__file__).resolve().parents[2]) not in text


# ---------------------------------------------------------------------------------------------------
# caps: the verdict cache is keyed by the verifier's version; trusted lock files out of the sandbox
# ---------------------------------------------------------------------------------------------------


def test_cached_verdict_is_not_served_by_another_verifier_version(tmp_path, monkeypatch):
    """Before: the key had no verifier version, so a verdict cached before a fix was served after it."""
    from verifier.backends import get_backend
    from verifier.cache import verdict_key
    from verifier.cache.signed_verdicts import store_verdict
    from verifier.config import VerifyConfig
    from verifier.result import VerificationResult

    version = verdict_key.verifier_version()
    assert len(version) == 16 and version == verdict_key.verifier_version()
    config = VerifyConfig(build_root=str(tmp_path))
    be = get_backend("cpu")
    key = verdict_key._verdict_key("ref", "cand", be, config)
    verdict = VerificationResult(backend="cpu", gates=[]).to_dict()
    store_verdict(tmp_path, key, verdict)
    assert verdict_key._cached_verdict(tmp_path, key, verdict["isolated"]) is not None
    monkeypatch.setattr(verdict_key, "verifier_version", lambda: "0123456789abcdef")
    other = verdict_key._verdict_key("ref", "cand", be, config)
    assert other != key and verdict_key._cached_verdict(tmp_path, other, verdict["isolated"]) is None


# ---------------------------------------------------------------------------------------------------
# probes drawn, not fixed
# ---------------------------------------------------------------------------------------------------


def test_drawn_shape_variant_reaches_the_task_size_class_with_prime_tails():
    from verifier.correctness import probes

    relu = [{"kind": "tensor", "shape": [2048, 4096], "dtype": "float32"}]
    labels = set()
    for seed in range(20):
        drawn = probes.shape_variants(relu, seed)[2]["recipe"][0]["shape"]
        n = drawn[0] * drawn[1]
        assert n >= probes.LARGE_FLOOR and n % 2 == 1  # odd: a tail past every power-of-two block
        labels.add(tuple(drawn))
    assert len(labels) > 10  # drawn per verification, not one fixed shape a kernel can recognise
    small = [{"kind": "tensor", "shape": [64, 128], "dtype": "float32"}]
    shape = probes.shape_variants(small, 3)[2]["recipe"][0]["shape"]
    assert shape[0] * shape[1] >= probes.LARGE_FLOOR and shape[1] != 128  # grown past the usual thresholds


@pytest.mark.slow
def test_relu_with_a_fast_path_tail_bug_is_caught(task_source, make_config):
    """Before: both held-out shapes were below 2^18 elements and the kernel's wrong path starts at 2^20:
    feasible. Now the drawn variant in the task's size class takes that path and leaves a tail."""
    source = (ROUND4 / "relu_fast_path_tail.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(time_kernels=False))
    correctness = next(g for g in res.gates if g.name == "correctness")
    probes_seen = {p["name"]: p["status"] for p in correctness.detail.get("probes", [])}
    assert not res.feasible, probes_seen
    assert correctness.reason.startswith("held-out shapes "), correctness.reason
    # #3 is always past 2^20 elements; #1 and #2, drawn up to the task's size class, may be there first
    assert "fail" in {probes_seen.get(f"held-out shapes #{k}") for k in (1, 2, 3)}, probes_seen


# ---------------------------------------------------------------------------------------------------
# a custom kernel must do the work it claims: its results are not its inputs handed back
# ---------------------------------------------------------------------------------------------------


def test_the_probe_counts_views_reshaped_and_recast_copies_of_an_input():
    """Before: only a same-shape, same-dtype copy counted; a flattened view or copy was "work"."""
    import torch

    from verifier.correctness.decoy import Probe

    x = torch.randn(16, 8)
    probe = Probe(torch)
    for fn in (lambda a: a.view(-1), lambda a: a.reshape(-1).clone(), lambda a: a.t(), lambda a: a[2:5],
               lambda a: a.double(), lambda a: a.expand(3, 16, 8)):
        probe.call(fn, (x,), {})
    assert (probe.results, probe.copies) == (6, 6)
    honest = Probe(torch)
    honest.call(lambda a: torch.relu(a).view(-1), (x,), {})  # work, then flattened
    honest.call(lambda a: a.relu_().view(-1), (x.clone(),), {})  # in place, handed back changed
    honest.call(lambda a: a.t().contiguous(), (x,), {})  # a transpose copy: the elements move (a copy task's work)
    assert (honest.results, honest.copies) == (4, 0)  # the in-place call: written and returned


def test_library_share_of_a_kernel_that_did_no_work_is_all_of_forward():
    """Before: the share was of kernel + torch time, so a kernel's useless passes read as custom work."""
    from verifier.gates.evidence import _torch_outside_kernel, library_ops

    split = {"kernel_ms": 94.0, "torch_ms": 6.0, "copy_ms": 0.0, "torch_ops": [("aten::clamp_min", 6.0)]}
    assert library_ops(split)[0]["share"] == 0.06  # no probe record: the kernel's time counts
    assert library_ops(split, probe={"results": 1, "copies": 0})[0]["share"] == 0.06
    assert library_ops(split, probe={"results": 1, "copies": 1})[0]["share"] == 1.0
    assert _torch_outside_kernel(split) is None
    assert "100%" in _torch_outside_kernel(split, probe={"results": 2, "copies": 2})
    assert library_ops({**split, "copy_ms": 6.0})[0]["share"] == 0.0566  # ATen's copies are forward's compute


@pytest.mark.slow
@pytest.mark.parametrize("name", ["noop_flat_copy_relu", "noop_view_relu"])
def test_a_kernel_handing_back_its_input_is_refused_under_kernelbench(task_source, make_config, name):
    """Before: feasible under the default policy (the flattened copy with torch's relu at 6% of forward,
    the view with `torch-work-outside-kernel` only reported). Now `copy-kernel` refuses both."""
    source = (ROUND4 / f"{name}.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False))
    gate = res.gates[0]
    assert not res.feasible and gate.detail.get("rule") == "copy-kernel", res.feedback()[:2000]
    assert gate.detail["policy"]["preset"] == "kernelbench"


def test_magnitude_scales_are_drawn_per_verification():
    """Before: every verification scaled by exactly x100 and x10000 (`magnitude_scales`)."""
    import random

    from verifier.config import VerifyConfig
    from verifier.correctness import probes

    assert VerifyConfig().magnitude_scales is None  # nothing fixed by default
    seen = set()
    for seed in range(50):
        low, high = probes.drawn_scales(random.Random(seed))
        assert 30 <= low <= high <= 3e4 and high >= 948  # one in each half of the log range
        seen.add((low, high))
    assert len(seen) == 50 and (100.0, 10000.0) not in seen
    dists = [t["dist"] for t in probes.probe_trials(VerifyConfig(shape_probe=False), random.Random(1))]
    assert dists == [f"x{s:g}" for s in probes.drawn_scales(random.Random(1))]


SOFTMAX_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 256)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_softmax_that_spots_the_fixed_scales_is_refused_by_drawn_ones(make_config, monkeypatch):
    """Before: the fixed x100 / x10000 probes were recognised by their rows' spread and passed, so the
    kernel was feasible. With the scales drawn from the verification's secret generator (fixed here so the
    test is deterministic: its scales avoid the spreads the kernel recognises), it is refused."""
    import random

    from verifier.correctness import probes
    from verifier.run import verification

    source = (ROUND4 / "softmax_spots_fixed_scales.py").read_text()
    fixed = verify(SOFTMAX_TASK, source, config=make_config(time_kernels=False, magnitude_scales=[100.0, 10000.0]))
    assert fixed.feasible, fixed.feedback()[:2000]  # what the fixed scales let through

    monkeypatch.setattr(verification.secrets, "randbits", lambda k: random.Random(4).getrandbits(k))
    res = verify(SOFTMAX_TASK, source, config=make_config(time_kernels=False))
    correctness = next(g for g in res.gates if g.name == "correctness")
    magnitude = [p for p in correctness.detail["probes"] if p["probe"] == "magnitude"]
    scales = [float(p["name"].removeprefix("inputs x")) for p in magnitude]
    # the gate stops at the first failing probe: the first drawn scale (327 for this seed) already fails
    assert scales and all(probes.SCALE_RANGE[0] <= s <= probes.SCALE_RANGE[1] for s in scales)
    assert not any(70 < s < 140 or 7000 < s < 14000 for s in scales), scales  # the seed's draw avoids them
    assert not res.feasible and correctness.reason.startswith(f"inputs x{scales[0]:g} (seed "), correctness.reason
    assert magnitude[0]["status"] == "fail", magnitude


# ---------------------------------------------------------------------------------------------------
# a verdict with no figure carries no ratios
# ---------------------------------------------------------------------------------------------------


def _unresolved_rounds():
    """Recorded rounds of the relu whose every round came out below the stub: (est, means, count, checked,
    clock) as `_timed_rounds` returns them, no round kept and none resolved."""
    from verifier.clock.stats import robust_paired

    ref = [2.01, 1.98, 2.05, 2.10, 1.99, 2.03]
    cand = [1e-4, 3e-5, 5e-5, 8e-5, 4e-5, 1e-4]  # clamped: the rounds' wall time minus the stub's, below zero
    n = len(ref)
    clock = {"overhead_ms": [40.0] * n, "reported_ms": [[0.5] * n], "idle_cpu_ms": [[0.0] * n],
             "lost": [[0.0] * n, [0.0] * n, [1.0] * n], "keep": [], "resolved": [], "psi_share": [],
             "repinned": 0, "walls_ms": [[60.0] * n, [40.0] * n, [38.0] * n], "input_sets": "seeded",
             "warmup_rounds": 1}
    return robust_paired(ref, cand, [], rng_seed=0), [ref, cand], 22, 132, clock


def test_a_verdict_with_no_figure_carries_no_ratios(monkeypatch):
    """Before: every round unresolved gave `no_figure` and no medians, yet `timing.lo/hi` read 19984-65828
    (the interval of the rounds that were thrown out)."""
    from types import SimpleNamespace

    from verifier.api import verdict_timing
    from verifier.config import VerifyConfig
    from verifier.run import timed_calls

    recorded = _unresolved_rounds()
    assert recorded[0].rounds == 0 and recorded[0].lo > 1000  # the thrown-out rounds' ratio: absurd
    monkeypatch.setattr(timed_calls, "_timed_rounds", lambda *_a, **_k: recorded)
    run = SimpleNamespace(config=VerifyConfig(), candidate={},
                          ref_side=SimpleNamespace(reference={"input_bytes": 1 << 25, "output_bytes": 1 << 25}))
    gate = timed_calls.latency_gate(run, None)  # type: ignore[arg-type]  # a stand-in run; the rounds are given
    assert gate.detail["no_figure"] and gate.reason.startswith("noisy: no round could be measured")
    for k in ("speedup", "lo", "hi", "halfwidth", "median_ms", "reference_ms", "gbps", "speedup_vs_compile"):
        assert gate.detail.get(k) is None, (k, gate.detail.get(k))
    timing = verdict_timing(gate.detail)
    assert timing["no_figure"] and timing["noisy"] and timing["rounds"] == 6
    assert "lo" not in timing and "hi" not in timing and "speedup" not in timing
    from verifier.result import VerificationResult

    result = VerificationResult(backend="cpu", gates=[], timing=timing)
    assert result.speedup_interval is None and result.speedup is None
    figure = verdict_timing({"speedup": 1.4, "lo": 1.3, "hi": 1.5, "noisy": False, "rounds": 9})
    assert (figure["lo"], figure["hi"], figure["speedup"]) == (1.3, 1.5, 1.4)


# ---------------------------------------------------------------------------------------------------
# a stub the candidate cannot make unlike itself: the overhead subtracted is bounded by its own stub round
# ---------------------------------------------------------------------------------------------------


@pytest.mark.alone
def test_the_overhead_subtracted_is_never_more_than_the_trusted_stub_nor_the_candidates_own():
    """`own_overhead_ratio`: the share of the trusted stub a candidate's rounds may subtract."""
    from verifier.clock.stats import attested_round_ms, own_overhead_ratio, unresolved

    trusted = [40.0, 42.0, 39.0, 41.0, 40.0]
    assert own_overhead_ratio(trusted, [None] * 5) == 1.0  # no own stub (the GPU): the trusted stub alone
    honest = own_overhead_ratio(trusted, [40.5, 41.0, 39.5, 42.0, 39.0])
    assert honest == 1.0
    # noise alone (an own stub a few percent either side of the trusted one) keeps it at 1: a median of
    # 0.99 would have subtracted 1% less of a stub that is three quarters of a relu round
    assert own_overhead_ratio(trusted, [t * f for t, f in zip(trusted, (0.97, 1.02, 0.99, 1.01, 0.98), strict=True)]) == 1.0
    # an own loop made cheaper (mallopt): only what its own loop costs comes off its rounds
    cheap = own_overhead_ratio(trusted, [24.0, 25.0, 23.5, 24.5, 24.0])
    assert 0.59 < cheap < 0.61  # its own median: nothing of the difference is left to it
    # an own stub made slow on purpose buys nothing beyond the trusted stub
    assert own_overhead_ratio(trusted, [400.0] * 5) == 1.0
    # one wild round moves the median of the ratios by one round's worth, no more
    assert abs(own_overhead_ratio(trusted, [24.0, 25.0, 23.5, 24.5, 1e6]) - cheap) < 0.03
    # the recorded relu round: its wall time (30 ms: loop 24 + calls 6) fell below the trusted stub (40 ms),
    # so it was unresolved with the trusted stub and gets its calls' time with its own
    assert unresolved(30.0, 40.0)
    assert not unresolved(30.0, cheap * 40.0)
    assert abs(attested_round_ms(30.0, cheap * 40.0, 1) - 6.0) < 1.5


def _mallopt_pair(task_source, make_config, task: str, attack: str):
    config = make_config(timing="full", static_scan=False, timing_budget_s=4.0, min_rounds=6)
    honest = verify(task_source(task), (Path(__file__).resolve().parents[1] / "candidates" / "cpu" / f"{task}.py")
                    .read_text(), config=config)
    hostile = verify(task_source(task), (ROUND4 / attack).read_text(), config=config)
    assert honest.feasible and hostile.feasible, (honest.feedback()[:1000], hostile.feedback()[:1000])
    return [next(g for g in r.gates if g.name == "latency").detail for r in (honest, hostile)]


@pytest.mark.slow
def test_mallopt_in_the_candidates_process_no_longer_shrinks_its_round_below_the_stub(task_source, make_config):
    """Before: the stub ran only in the reference worker's process, so `mallopt(M_MMAP_MAX, 0)` in the
    candidate's module made its loop cheaper than the stub and the difference came off its calls (softmax
    2048x4096, `softmax_mallopt.py`: 1.46x and 5.95x against 0.78x and 0.58x; relu: every round below the
    stub, no figure). Then its harness ran its own stub round after each round, and no more than that was
    subtracted (its own loop came out at 0.61-0.70 of the trusted stub). Now both processes time their
    rounds under the same cheapest allocator settings (`paired_calls.steady_heap`), so the line changes
    nothing: its own loop costs what the trusted stub costs, as an honest candidate's does. (What the line
    still bought in the calls themselves is `test_hostile_round4_checks.py`'s paired comparison.)"""
    honest, hostile = _mallopt_pair(task_source, make_config, "relu", "relu_mallopt.py")
    print({k: (honest.get(k), hostile.get(k)) for k in ("speedup", "trusted_overhead_ms", "own_overhead_ms",
                                                         "overhead_ms", "own_overhead_ratio", "noisy", "no_figure")})
    for side in (honest, hostile):
        assert side["overhead_ms"] <= 1.0001 * side["trusted_overhead_ms"]  # never more than the trusted stub
        # the candidate's own stub is the trusted one within the noise: all of it is subtracted
        assert side["own_overhead_ratio"] > 0.9 and not side["own_overhead_cheaper"], side


def test_held_out_shapes_one_and_two_are_drawn_and_prime_only_by_chance():
    """Before: #1 and #2 were fixed small primes (509x509 and 61x4096 for relu): "a prime size" meant
    "a probe". Now both are drawn per verification from the probe trial's seed, odd sizes over a range from
    a few thousand elements to the task's own size class, a multiple of 64 plus a prime tail."""
    from verifier.correctness import probes

    relu = [{"kind": "tensor", "shape": [2048, 4096], "dtype": "float32"}]
    firsts, seconds, prime_free = set(), set(), 0
    for seed in range(60):
        one, two = (v["recipe"][0]["shape"] for v in probes.shape_variants(relu, seed)[:2])
        assert all(s % 2 for s in one) and two[1] == 4096 and two[0] % 2 and 3 <= two[0] < 2048
        firsts.add(tuple(one))
        seconds.add(two[0])
        prime_free += not any(probes.prev_prime(s) == s for s in one)
    assert len(firsts) > 50 and len(seconds) > 30
    assert prime_free > 10  # a kernel that computes its tail only on a prime size fails these
    sizes = [s for one in firsts for s in one]
    assert min(sizes) < 200 and max(sizes) > 1900  # small shapes and the task's own size class


@pytest.mark.slow
def test_relu_that_spots_prime_probe_shapes_is_refused(task_source, make_config, monkeypatch):
    """Before: the relu that drops its `numel % 4096` tail unless a size is prime passed all three held-out
    shapes (509x509, 61x4096, and the drawn #3, all prime) and was feasible. With #1 and #2 drawn, a
    verification whose draw has no prime size refuses it (the secret seed is fixed here, and a few are
    tried, so the test does not hang on which seeds the trial loop draws first; a draw refused by #3 alone,
    whose sizes are not all prime in most seeds, shows nothing of #1 and #2 and the next is tried)."""
    import random

    from verifier.run import verification

    source = (ROUND4 / "relu_spots_prime_shapes.py").read_text()
    seen = []
    for k in range(3, 11):
        monkeypatch.setattr(verification.secrets, "randbits", lambda b, k=k: random.Random(k).getrandbits(b))
        res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False))
        correctness = next(g for g in res.gates if g.name == "correctness")
        seen.append({p["name"]: (p["status"], p.get("label")) for p in correctness.detail.get("probes", [])})
        if not res.feasible:
            assert correctness.reason.startswith("held-out shapes "), correctness.reason
            failed = [v for n, v in seen[-1].items() if n in ("held-out shapes #1", "held-out shapes #2")]
            if any(status == "fail" for status, _label in failed):
                return
    pytest.fail(f"not refused by held-out shapes #1 or #2 under any draw tried: {seen}")


# ---------------------------------------------------------------------------------------------------
# the trusted side's lock files out of the tree the sandbox sees
# ---------------------------------------------------------------------------------------------------


def test_trusted_locks_of_the_shared_tree_lie_beside_it(tmp_path):
    """Before: `locked(ROOT/shared/...)` made its lock file inside the tree every sandbox sees read-only."""
    from verifier.build.locks import keep_locks_outside, lock_path, locked, try_lock, unlock

    shared = tmp_path / "root" / "shared"
    inside = shared / "bind" / "k1" / "bind.lock"
    assert lock_path(inside) == inside  # no `shared.locks` yet (a tree the trusted side never set up)
    keep_locks_outside(shared)
    assert lock_path(inside) == tmp_path / "root" / "shared.locks" / "bind" / "k1" / "bind.lock"
    with locked(shared / "pch" / "evk_tiny-x.lock"):
        held = try_lock(inside)
        assert held is not None and try_lock(inside) is None  # still excludes a second builder
        unlock(held)
    assert (shared / "bind" / "k1").is_dir()  # the guarded directory is still made: the builder writes there
    assert not list(shared.rglob("*.lock")), list(shared.rglob("*.lock"))
    other = tmp_path / "job" / "ext" / "k.lock"  # a sandbox's own build root: unchanged
    assert lock_path(other) == other


@pytest.mark.slow
def test_a_candidate_finds_no_trusted_lock_to_hold(task_source, make_config):
    """The candidate walks the shared tree it sees and takes every `.lock` it finds. Before: it found the
    trusted builders' locks (a trusted lock is taken here first, as a build would) and held them."""
    from verifier.build.locks import locked

    config = make_config(static_scan=False, time_kernels=False)
    shared = Path(config.root()) / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    from verifier.build.locks import keep_locks_outside

    keep_locks_outside(shared)
    with locked(shared / "pch" / "evk_round4_probe.lock"):
        pass
    res = verify(task_source("relu"), (ROUND4 / "holds_shared_locks.py").read_text(), config=config)
    text = json.dumps(res.to_dict())
    assert not res.feasible and "SHARED-LOCKS found=0 held=0" in text and "exists=True" in text, text[:1500]


# ---------------------------------------------------------------------------------------------------
# host paths in the sandbox's mount table (/proc/self/mountinfo, /proc/self/mounts, /proc/mounts)
# ---------------------------------------------------------------------------------------------------

MOUNTS_PROBE = r'''
import json, os
out = {}
for f in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/mounts"):
    out[f] = open(f).read()
roots = []
for line in out["/proc/self/mountinfo"].splitlines():
    fields = line.split(" ")
    dec = lambda p: p.encode().decode("unicode_escape")
    roots.append([dec(fields[3]), dec(fields[4]), fields[fields.index("-") + 1], os.path.exists(dec(fields[3]))])
out["roots"] = roots
print(json.dumps(out))
'''


def _mount_table(job: Path, legacy_etc: bool = False) -> dict:
    """The sandbox's mount table as the candidate reads it, from a sandbox started as the verifier starts
    one (`sandbox_command`); `legacy_etc`: the synthetic /etc files bound from the scratch, as before."""
    import sys

    from verifier.sandbox.isolation import (
        SandboxSpec,
        default_hidden,
        private_scratch,
        sandbox_command,
        write_synthetic_etc,
    )

    job.mkdir(exist_ok=True)
    (job / "probe.py").write_text(MOUNTS_PROBE)
    spec = SandboxSpec(writable=[job], hidden=[*default_hidden(), private_scratch()],
                       etc_dir=write_synthetic_etc() if legacy_etc else None)
    argv, fds = sandbox_command(spec, [sys.executable, str(job / "probe.py")])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_sandbox_mount_table_names_no_host_location_of_the_synthetic_etc(tmp_path):
    """Before: /etc/passwd, group and hosts were bound from the private scratch, so the sandbox's
    /proc/self/mountinfo named their host location (`/evokernel-<uid>/etc-<key>/passwd`), which the
    sandbox cannot see otherwise. Now they come from memory (`--ro-bind-data`): no host path. What
    remains (see the README's limits): the mount points and the bound trees' paths within their host
    filesystem, which mountinfo shows and no bubblewrap option hides."""
    from verifier.sandbox.isolation import private_scratch, write_synthetic_etc

    etc = write_synthetic_etc()
    scratch = private_scratch()
    before = _mount_table(tmp_path / "before", legacy_etc=True)
    assert etc.name in before["/proc/self/mountinfo"]  # the leak, with the files bound as before
    seen = _mount_table(tmp_path / "job")
    text = "\n".join(seen[f] for f in ("/proc/self/mountinfo", "/proc/self/mounts", "/proc/mounts"))
    assert etc.name not in text and "etc-" not in text
    assert "/etc/passwd" in text  # the synthetic files are still there, from memory
    # every path the table names as a bind's source is a path the sandbox sees anyway (the bind's own
    # mount point, a system directory), bubblewrap's own (its root and data files) or a device node's
    system = tuple(f"{d}/" for d in ("/usr", "/bin", "/lib", "/lib64", "/sbin"))
    for root, point, fstype, _exists in seen["roots"]:
        if root in ("/", point) or root.startswith(system) or point.startswith(("/dev/", "/proc/")):
            continue
        assert root.startswith(("/newroot", "/bindfile")), (root, point, fstype)
        assert str(scratch) not in root and scratch.name not in root


def test_verdict_text_quoting_the_mount_table_is_scrubbed_of_host_paths(tmp_path, monkeypatch):
    """bubblewrap cannot hide /proc/self/mountinfo: under a container a bound tree's line names its host
    directory (the bind's source within its filesystem) and overlay layers name the host's storage. Text
    that quotes them is scrubbed with the trusted side's own mount table (`host_text.mount_table_paths`)."""
    from verifier.gates.evidence import bounded_report
    from verifier.sandbox import host_text

    table = tmp_path / "mountinfo"
    table.write_text(
        "27 1 254:0 / / rw - ext4 /dev/vda rw\n"
        "28 27 254:0 /srv/people/alice\\040w/evk /work/evk rw - ext4 /dev/vda rw\n"
        "29 27 0:5 /null /dev/null rw - devtmpfs udev rw\n"
        "30 27 0:40 / / rw - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/AB:/var/lib/docker/"
        "overlay2/l/CD,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work\n")
    paths = host_text.mount_table_paths(table)
    assert "/srv/people/alice w/evk" in paths and "/var/lib/docker/overlay2/l/CD" in paths
    assert "/null" not in paths and "/" not in paths
    real = host_text.mount_table_paths
    monkeypatch.setattr(host_text, "mount_table_paths", lambda mountinfo=table: real(mountinfo))
    quoted = ("RuntimeError: 168 152 254:0 /srv/people/alice\\040w/evk /work/evk ro - ext4 /dev/vda rw | "
              "overlay / overlay rw,lowerdir=/var/lib/docker/overlay2/l/AB,upperdir=/var/lib/docker/overlay2/x/diff")
    report = bounded_report({"error": quoted, "traceback": quoted})
    for text in (report["error"], report["traceback"]):
        assert "alice" not in text and "overlay2" not in text and "<host-path>" in text
        assert "/dev/vda" in text  # the rest of the line is left as it was
