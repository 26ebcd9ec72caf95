"""The last parts of the fourth held-out hostile round (issue 37): a decoy that raises on its garbled
result, the job directory's cap, executable memory made at run time, the mount table in a verdict, the
sandbox as an ordinary user, and a verification killed mid-way.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from verifier import verify

ROUND4 = Path(__file__).resolve().parents[1] / "candidates" / "hostile_round4"


# ---------------------------------------------------------------------------------------------------
# a checked forward that raises is a refusal, not a skipped check
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("seeded", [True, False], ids=["seeded", "files"])
def test_a_forward_raising_on_its_garbled_result_is_refused(task_source, make_config, seeded):
    """Before: the candidate (torch computes, the kernel's result is only fingerprinted, forward raises
    when the fingerprint breaks) raised in both checked forwards and nowhere else; a raise there read as
    "the result reached the control flow", so it was feasible under `kernelbench`. Now it is `decoy-kernel`."""
    source = (ROUND4 / "raises_on_garbled_result.py").read_text()
    res = verify(task_source("relu"), source,
                 config=make_config(time_kernels=False, seeded_inputs=seeded))
    gate = res.gates[0]
    assert not res.feasible and gate.detail.get("rule") == "decoy-kernel", res.feedback()[:2000]
    assert "forward raised in a checked call" in json.dumps(res.to_dict())
    assert "changed under me" in json.dumps(res.to_dict())  # the candidate's own error, quoted


# ---------------------------------------------------------------------------------------------------
# the job directory on a tmpfs of its own, capped
# ---------------------------------------------------------------------------------------------------


def _shmem_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1]) * 1024
    return 0


def _verify_watching_shmem(reference: str, source: str, config) -> tuple[object, int]:
    """`verify(...)` while a thread samples the host's Shmem every 10 ms: (result, highest rise seen)."""
    import threading
    import time

    base = _shmem_bytes()
    peak = [base]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _shmem_bytes())
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        res = verify(reference, source, config=config)
    finally:
        done.set()
        t.join()
    return res, peak[0] - base


def test_the_sandbox_mounts_the_job_directory_as_a_tmpfs_of_the_planned_size(tmp_path):
    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv
    from verifier.sandbox.job_mount import MIN_JOB_BYTES, job_bytes

    assert job_bytes(8.0) == 2 * 1024**3 and job_bytes(1.0) == MIN_JOB_BYTES and job_bytes(8.0, 300) == 300 << 20
    job = tmp_path / "job"
    job.mkdir()
    argv = bwrap_argv(SandboxSpec(writable=[job], job_bytes=123 << 20), ["/bin/true"], trees=[Path("/usr")])
    i = argv.index(str(job.resolve()))
    assert argv[i - 3:i] == ["--size", str(123 << 20), "--tmpfs"]  # not a bind of the host directory
    assert "--bind" not in argv


def test_a_spare_sandbox_with_another_job_cap_is_not_taken():
    """A spare started with the default cap (2 GiB) served a verification asking for 256 MiB (seen as the
    ordinary user: the candidate wrote 1.94 GiB): the cap is part of the spare's key now."""
    from verifier.backends import get_backend
    from verifier.config import VerifyConfig
    from verifier.workers.pools import _spare_key

    be = get_backend("cpu")
    assert _spare_key(VerifyConfig(), be, True) != _spare_key(VerifyConfig(job_dir_mb=256), be, True)


@pytest.mark.slow
@pytest.mark.parametrize("keep_going", [False, True], ids=["raises", "keeps-going"])
def test_a_candidate_filling_its_job_directory_stops_at_the_cap(task_source, make_config, keep_going):
    """Before: four 1 GiB files in the job directory (host /dev/shm) raised host Shmem by 4 GB. Now the job
    directory is a tmpfs of its own (256 MiB here): the writes stop there with ENOSPC, host Shmem rises by
    no more than the cap (and the other work on the machine), and the verdict fails cleanly, whether the
    candidate raises or carries on into the full directory."""
    cap = 256 << 20
    source = (ROUND4 / "fills_job_dir.py").read_text()
    if keep_going:
        source = source.replace("KEEP_GOING = False", "KEEP_GOING = True")
    config = make_config(static_scan=False, time_kernels=False, job_dir_mb=cap >> 20)
    res, rise = _verify_watching_shmem(task_source("relu"), source, config)
    text = json.dumps(res.to_dict())
    assert not res.feasible, text[:2000]
    assert rise < cap + (384 << 20), f"host Shmem rose by {rise >> 20} MiB with a {cap >> 20} MiB cap"
    if keep_going:
        assert "No space left on device" in text or "job directory was full" in text, text[:3000]
    else:
        wrote = int(text.split("JOB-FILL wrote=")[1].split()[0])
        assert "enospc=True" in text and cap - (128 << 20) <= wrote <= cap, text[:2000]


# ---------------------------------------------------------------------------------------------------
# executable memory with no file behind it: out of the binary audit's sight
# ---------------------------------------------------------------------------------------------------

MAPS = """\
55d0c0a00000-55d0c0a21000 r-xp 00001000 fd:01 1234 /usr/bin/python3.11
7f0c8467e000-7f0c846be000 rwxp 00000000 00:00 0
7f0c8727e000-7f0c8727f000 r-xp 00000000 00:00 0                          [anon:jit]
7f0c87280000-7f0c87281000 r-xp 00000000 00:05 77 /memfd:evk-jit (deleted)
7ffd1e5f4000-7ffd1e5f6000 r-xp 00000000 00:00 0                          [vdso]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
7ffd1e5a0000-7ffd1e5c1000 rw-p 00000000 00:00 0                          [stack]
"""


def test_anonymous_executable_mappings_are_found_in_a_maps_text():
    from verifier.policy.mapped_audit import anonymous_exec, anonymous_exec_finding

    found = anonymous_exec(MAPS)
    assert found == [("7f0c8467e000-7f0c846be000", "rwxp", 0x40000), ("7f0c8727e000-7f0c8727f000", "r-xp", 4096)]
    rule, text = anonymous_exec_finding({(7, r): (p, n) for r, p, n in found})
    assert rule == "anon-exec" and "2 executable memory region(s)" in text and "260 KiB" in text
    assert anonymous_exec_finding({}) is None


def test_anon_exec_is_reported_under_kernelbench_and_refused_under_strict():
    from verifier.policy.rules import make_policy

    assert make_policy("strict").refuses("anon-exec") and not make_policy("kernelbench").refuses("anon-exec")


def _rules(res) -> tuple[list[str], list[str]]:
    gate = res.gates[0]
    refused = [v["rule"] for v in gate.detail.get("violations", [])]
    return refused, [r.get("rule") if isinstance(r, dict) else r for r in gate.detail.get("reported", [])]


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["kernelbench", "strict"])
def test_code_written_to_anonymous_memory_at_run_time_is_seen(task_source, make_config, policy):
    """Before: no finding at all (the audit reads mapped files only; the region has none), the verdict
    feasible under both presets. Now `anon-exec`: reported under kernelbench; under strict the sandbox's
    syscall filter refuses the mapping itself (EPERM at import), and with that filter lifted
    (`--allow anon-exec` lifts the refusal too) the audit still sees the region."""
    source = (ROUND4 / "runs_code_made_at_run_time.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False, policy=policy))
    refused, reported = _rules(res)
    text = json.dumps(res.to_dict())
    if policy == "strict":
        assert not res.feasible and "PermissionError: [Errno 1] Operation not permitted" in text, text[:2000]
        import verifier.workers.pools as pools

        lifted = pytest.MonkeyPatch()
        lifted.setattr(pools, "no_anonymous_exec", lambda config: False)
        try:
            res = verify(task_source("relu"), source,
                         config=make_config(static_scan=False, time_kernels=False, policy=policy))
        finally:
            lifted.undo()
        refused, reported = _rules(res)
        text = json.dumps(res.to_dict())
        assert not res.feasible and "anon-exec" in refused, text[:2000]
    else:
        assert res.feasible and "anon-exec" in text, text[:2000]
    assert "executable memory region(s) with no file behind them" in text


@pytest.mark.slow
def test_code_in_a_memfd_mapped_executable_is_refused(task_source, make_config):
    """The memfd variant: a deleted file mapped executable is read by the audit, and raw code is no ELF
    object: it cannot be audited, refused under the default policy."""
    source = (ROUND4 / "runs_code_made_at_run_time.py").read_text().replace('MODE = "anon"', 'MODE = "memfd"')
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False))
    refused, _reported = _rules(res)
    assert not res.feasible and "binary-import" in refused, json.dumps(res.to_dict())[:2000]
    assert "memfd:evk-jit" in json.dumps(res.to_dict())


# ---------------------------------------------------------------------------------------------------
# the mount table raised as an error: no host path in the verdict
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_mountinfo_raised_as_an_error_leaves_no_host_path_in_the_verdict(task_source, make_config):
    """The candidate packs every mount point and bind source of its /proc/self/mountinfo into its error.
    Before: the project's path, the private scratch and its run directory (the job's path) were in the
    verdict text. Now the candidate still reads them (the placeholders show where), the verdict has none."""
    import sys

    from verifier.sandbox.isolation import private_scratch

    config = make_config(static_scan=False, time_kernels=False)
    res = verify(task_source("relu"), (ROUND4 / "mountinfo_in_error.py").read_text(), config=config)
    text = json.dumps(res.to_dict()) + res.feedback()
    assert not res.feasible and "MOUNTS " in text, text[:2000]
    project = str(Path(__file__).resolve().parents[2])
    assert "<project>" in text or "<host-path>" in text, text[:2000]  # it did read host paths
    for host in (project, str(private_scratch()), str(Path(config.root())), str(Path.home()), sys.prefix):
        if len(Path(host).parts) > 2:  # /root, /usr: a system path says nothing of this host
            assert host not in text, (host, text[:3000])
    at = text.find("evokernel-")
    assert at < 0, text[max(0, at - 300):at + 100]  # the private scratch's name (/dev/shm/evokernel-UID)


# ---------------------------------------------------------------------------------------------------
# the sandbox as an ordinary user: real verifications run as `evk`
# ---------------------------------------------------------------------------------------------------

AS_USER = r"""
import json, sys, time
from pathlib import Path
from verifier import verify, VerifyConfig
from core.tasks import load_task

root = Path(sys.argv[1])
relu = load_task("relu").source
r4 = root / "tests/candidates/hostile_round4"
out = {}
cases = {"honest": (root / "tests/candidates/cpu/relu.py", {}),
         "raises": (r4 / "raises_on_garbled_result.py", {}),
         "fills": (r4 / "fills_job_dir.py", {"static_scan": False, "job_dir_mb": 256}),
         "mimic": (r4 / "mimics_on_garbled_result.py", {}),
         "jit_strict": (r4 / "maps_code_within_forward.py", {"static_scan": False, "policy": "strict"}),
         "jit_kernelbench": (r4 / "maps_code_within_forward.py", {"static_scan": False}),
         "nested": (r4 / "cpp_nested_namespace.py", {"static_scan": False})}
for name in sys.argv[2:]:
    path, extra = cases[name]
    cfg = VerifyConfig(use_cache=False, trials=2, time_kernels=name == "honest", timing_budget_s=1.0, **extra)
    t0 = time.monotonic()
    res = verify(relu, path.read_text(), config=cfg)
    gate = res.gates[0]
    out[name] = {"feasible": res.feasible, "isolated": res.isolated, "rule": gate.detail.get("rule"),
                 "refused": [v.get("rule") for v in gate.detail.get("violations", [])],
                 "seconds": round(time.monotonic() - t0, 1),
                 "text": json.dumps(res.to_dict())[:4000]}
print("RESULT " + json.dumps(out))
"""


def _as_user(*cases: str) -> dict:
    """Verify `cases` of AS_USER as `evk`, in its own process (`ordinary_user.run_as_user`: the checkout
    and its Python reachable through a private mount namespace, nothing of the tree's modes changed)."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from tests.verifier.ordinary_user import ROOT, ordinary_user, run_as_user, user_env

    user = ordinary_user()
    base = Path(tempfile.mkdtemp(prefix="evk-real-", dir="/var/tmp"))
    try:
        os.chmod(base, 0o755)
        script = base / "as_user.py"
        script.write_text(AS_USER)
        script.chmod(0o644)
        home = user.pw_dir if os.path.isdir(user.pw_dir) else str(base / "home")  # `useradd` without -m
        if home != user.pw_dir:
            os.mkdir(home)
            os.chown(home, user.pw_uid, user.pw_gid)
        proc = run_as_user([sys.executable, str(script), str(ROOT), *cases], user, user_env(user, home),
                           cwd=str(base), timeout=1200, capture_output=True, text=True)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the verifications as `evk` ran past {exc.timeout} s") from None
    finally:
        shutil.rmtree(base, ignore_errors=True)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, (proc.returncode, proc.stderr[-3000:])
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.slow
def test_honest_and_code_made_at_run_time_as_an_ordinary_user():
    """As `evk` (no privileges): an honest relu feasible and isolated, with the exec watch's listener
    handed from the user's own sandbox to the user's trusted side (seccomp user notification without
    privileges) and its events counted; code made and dropped within forward refused under kernelbench
    (`hidden-exec`: the watch sees it) and under strict (the filter's EPERM); the helper in a nested
    namespace refused by the syscall filter."""
    out = _as_user("honest", "jit_kernelbench", "jit_strict", "nested")
    honest = out["honest"]
    assert honest["feasible"] and honest["isolated"], honest["text"]
    # the watch ran (a listener not handed over is a VerifierError, no verdict) and saw the code made
    jit = out["jit_kernelbench"]
    assert not jit["feasible"] and "hidden-exec" in jit["refused"], jit["text"]
    assert not out["jit_strict"]["feasible"] and "PROT_EXEC refused" in out["jit_strict"]["text"], out["jit_strict"]
    nested = out["nested"]
    assert not nested["feasible"], nested["text"]
    assert "NESTED-NAMESPACE-REFUSED errno=1" in nested["text"] or "NESTED-NAMESPACE-REFUSED errno=28" in nested[
        "text"], nested["text"]


@pytest.mark.slow
def test_decoys_and_the_job_cap_as_an_ordinary_user():
    """As `evk`: the decoy that raises on its garbled result refused (`decoy-kernel`), the mimic refused by
    the followed trial, and the job-filling candidate stopped by its 256 MiB job tmpfs, which the trusted
    side holds through `/proc/<pid>/root` of the user's own sandbox."""
    out = _as_user("raises", "mimic", "fills")
    assert not out["raises"]["feasible"] and out["raises"]["rule"] == "decoy-kernel", out["raises"]["text"]
    assert not out["mimic"]["feasible"] and out["mimic"]["rule"] == "decoy-kernel", out["mimic"]["text"]
    fills = out["fills"]
    assert not fills["feasible"] and "enospc=True" in fills["text"], fills["text"]
    wrote = int(fills["text"].split("JOB-FILL wrote=")[1].split()[0])
    assert wrote <= 256 << 20


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["kernelbench", "strict"])
def test_a_forward_handing_back_its_garbled_result_is_refused(task_source, make_config, policy):
    """Same fingerprint as an honest kernel's, and on garbage the garbled result handed back, as an honest
    kernel's output would be: the garbling probes cannot tell it. Before: feasible under kernelbench with
    `reference-op-at-runtime` only reported (torch's share 14%, the kernel's own useless pass making it
    small). Now one ordinary trial, drawn in secret, follows the kernel's result through torch's operators
    (`decoy.Flow`): it reaches no output, so `decoy-kernel` refuses it under every preset, with the static
    scan or without (strict's scan refuses torch's relu in forward first)."""
    source = (ROUND4 / "mimics_on_garbled_result.py").read_text()
    for static_scan in ([True, False] if policy == "kernelbench" else [True]):
        res = verify(task_source("relu"), source, config=make_config(time_kernels=False, policy=policy,
                                                                     static_scan=static_scan))
        refused, _reported = _rules(res)
        text = json.dumps(res.to_dict())
        assert not res.feasible, text[:2000]
        if policy == "strict" and static_scan:
            assert {"torch-op", "reference-op-at-runtime"} & set(refused), text[:2000]
        else:
            assert "decoy-kernel" in refused and "none of them reached" in text, text[:2000]


@pytest.mark.slow
def test_the_job_directory_planned_from_the_task_holds_an_honest_large_task_and_stops_the_filler(
        task_source, make_config, monkeypatch):
    """Through `core.verifying.verify_task`, with the task's estimate known (as every command works it out
    first): an honest relu with 128 MiB inputs and outputs fits the job directory planned for it, and the
    candidate that fills its job directory is stopped at the small relu's plan (not at a quarter of the
    memory limit)."""
    import verifier.api
    from core.tasks import Task, estimate_task_memory, job_dir_mb
    from core.verifying import verify_task

    used = []
    real = verifier.api.verify
    monkeypatch.setattr(verifier.api, "verify", lambda *a, **k: (used.append(k["config"]), real(*a, **k))[1])
    big_source = task_source("relu").replace("torch.randn(2048, 4096)", "torch.randn(4096, 8192)")
    assert big_source != task_source("relu")
    big = Task(name="relu_big", level=1, category="", description="", source=big_source)
    small = Task(name="relu", level=1, category="", description="", source=task_source("relu"))
    est_big, est_small = estimate_task_memory(big), estimate_task_memory(small)
    assert est_big is not None and est_small is not None and est_big.outputs_bytes == 128 << 20

    honest = (Path(__file__).resolve().parents[1] / "candidates" / "cpu" / "relu.py").read_text()
    res = verify_task(big, honest, "cpu", make_config(static_scan=False, time_kernels=False))
    assert used[-1].job_dir_mb == job_dir_mb(est_big) and res.feasible, json.dumps(res.to_dict())[:2000]

    plan = job_dir_mb(est_small)
    res = verify_task(small, (ROUND4 / "fills_job_dir.py").read_text(), "cpu",
                      make_config(static_scan=False, time_kernels=False))
    text = json.dumps(res.to_dict())
    assert used[-1].job_dir_mb == plan and not res.feasible, text[:2000]
    wrote = int(text.split("JOB-FILL wrote=")[1].split()[0])
    assert "enospc=True" in text and wrote <= plan << 20, text[:2000]


# ---------------------------------------------------------------------------------------------------
# executable memory mapped and unmapped within one forward: no audit between forwards sees it
# ---------------------------------------------------------------------------------------------------


def test_the_strict_filter_denies_anonymous_executable_memory_only():
    from verifier.sandbox.syscall_filter import program

    base, strict = program("x86_64"), program("x86_64", no_anonymous_exec=True)
    assert base is not None and strict is not None and len(strict) == len(base) + 13 * 8
    assert strict.startswith(base[: len(base) - 11 * 8])  # the same denials first, then the exec rule


FILTER_PROBE = r'''
import ctypes, json, mmap
import torch
out = {}
try:
    mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    out["anon_rwx"] = "ok"
except OSError as exc:
    out["anon_rwx"] = exc.errno
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
a = libc.mmap(None, 4096, 3, 0x22, -1, 0)
out["anon_rw"] = a is not None and a != ctypes.c_void_p(-1).value
out["mprotect_exec"] = libc.mprotect(a, 4096, 5) == 0 or ctypes.get_errno()
out["torch"] = float((torch.randn(64, 64) @ torch.randn(64, 64)).abs().sum()) > 0 and tuple(
    torch.nn.functional.conv2d(torch.randn(1, 3, 16, 16), torch.randn(4, 3, 3, 3)).shape) == (1, 4, 14, 14)
print("RESULT " + json.dumps(out))
'''


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True], ids=["kernelbench", "strict"])
def test_a_strict_sandbox_makes_no_anonymous_executable_memory(tmp_path, strict):
    """Started as the verifier starts one: under strict, anonymous executable memory is refused (EPERM) and
    torch still imports and computes (matmul, convolution); under kernelbench nothing changes."""
    import errno
    import subprocess
    import sys

    from verifier.sandbox.isolation import SandboxSpec, sandbox_command

    argv, fds = sandbox_command(SandboxSpec(writable=[tmp_path], no_anonymous_exec=strict), [sys.executable, "-c", FILTER_PROBE])
    try:
        proc = subprocess.run(argv, pass_fds=fds, capture_output=True, text=True, timeout=300)
    finally:
        for fd in fds:
            os.close(fd)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    out = json.loads(line.removeprefix("RESULT "))
    assert out["anon_rw"] is True and out["torch"] is True, out
    if strict:
        assert out["anon_rwx"] == errno.EPERM and out["mprotect_exec"] == errno.EPERM, out
    else:
        assert out["anon_rwx"] == "ok" and out["mprotect_exec"] is True, out


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["kernelbench", "strict"])
def test_code_mapped_and_unmapped_within_forward(task_source, make_config, policy):
    """Before: feasible under both presets with no finding (the audit reads mappings between forwards).
    Now refused under strict (its forward meets EPERM) and under kernelbench (the exec watch saw the region
    made and found it gone: `hidden-exec`; every way of making and dropping it: test_exec_watch.py)."""
    source = (ROUND4 / "maps_code_within_forward.py").read_text()
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, time_kernels=False, policy=policy))
    text = json.dumps(res.to_dict())
    if policy == "strict":
        assert not res.feasible and "PROT_EXEC refused" in text, text[:2000]
    else:
        refused, _reported = _rules(res)
        assert not res.feasible and "hidden-exec" in refused, text[:2000]
