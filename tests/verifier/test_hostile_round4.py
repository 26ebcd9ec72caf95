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
        assert n >= probes.LARGE_FLOOR and n % 2 == 1 and all(probes.prev_prime(s) == s for s in drawn)
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
    assert probes_seen.get("held-out shapes #3") == "fail", probes_seen
