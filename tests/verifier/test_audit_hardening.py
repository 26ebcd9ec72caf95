"""Issue 21: hostile candidates that won against the binary audit, the trusted builds and the sandbox's
view of the host, each with the static scan off where the attack needs it (what is tested is the
run-time defence). The C++-building ones are marked `slow`."""

from __future__ import annotations

import json
import mmap
import os
import secrets
import time
from pathlib import Path

import pytest

from verifier import verify
from verifier.policy.mapped_audit import (
    Mapping,
    audit_objects,
    is_candidate_writable,
    open_mapped,
    parse_maps,
)

HEAD = '''import os, glob
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
'''

RELU = r"""
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;
"""

# imports sgemm_ (weak, so the library loads without BLAS), never calls it: what matters is the audit
BLAS_CPP = 'BLAS = r"""\n#include <torch/extension.h>\n' \
    'extern "C" void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, ' \
    'const float*, const int*, const float*, const int*, const float*, float*, const int*) __attribute__((weak));\n' \
    'torch::Tensor kernel_forward(torch::Tensor x) {\n' \
    '    if (x.numel() < 0 && sgemm_ != nullptr) sgemm_(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, ' \
    'nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);\n' + RELU + '}\n"""\n'
CLEAN_CPP = 'CLEAN = r"""\n#include <torch/extension.h>\ntorch::Tensor kernel_forward(torch::Tensor x) {\n' \
    + RELU + '}\n"""\n'

MODEL = '''

class ModelNew(nn.Module):
    def forward(self, x):
        return _blas.kernel_forward(x)
'''

# what a hostile candidate does after loading: find its mapped .so, drop the objects the audit globbed
HIDE = '''
def _mapped(name):
    for line in open("/proc/self/maps"):
        if name in line and line.rstrip().endswith(".so"):
            return line.split(None, 5)[5].strip()


_blas_so = _mapped("evk_audit_{tag}")
for _o in glob.glob(os.path.join(os.path.dirname(_blas_so), "*.o")):
    os.remove(_o)
'''


@pytest.fixture()
def hostile_config(make_config):
    # strict: these kernels import BLAS to be seen by the audit, which the kernelbench preset only reports
    return lambda **kw: make_config(static_scan=False, **{"policy": "strict", **kw})


def _anti_hacking_detail(res) -> str:
    gate = res.failed_gate
    assert gate is not None and gate.name == "anti_hacking", res.feedback()
    return json.dumps(gate.detail) + gate.reason


# ---------------------------------------------------------------------------------------------------
# 1. the audit reads what is mapped, in every process, and fails what it cannot parse
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_kernel_so_replaced_after_loading_is_audited_as_mapped(task_source, hostile_config):
    """Load a kernel importing sgemm_, then rename a clean build over its .so (and delete its objects):
    a by-path audit read the clean file; the mapped object still imports sgemm_."""
    source = HEAD + BLAS_CPP + CLEAN_CPP + '''
_blas = load_inline(name="evk_audit_swap", cpp_sources=[BLAS], functions=["kernel_forward"], extra_cflags=["-O3"])
_clean = load_inline(name="evk_audit_swapclean", cpp_sources=[CLEAN], functions=["kernel_forward"],
                     extra_cflags=["-O3"])
''' + HIDE.format(tag="swap.") + '''
_clean_so = _mapped("evk_audit_swapclean")
with open(_blas_so + ".new", "wb") as _fh:
    _fh.write(open(_clean_so, "rb").read())
os.replace(_blas_so + ".new", _blas_so)
''' + MODEL
    res = verify(task_source("relu"), source, config=hostile_config())
    assert not res.feasible, res.feedback()
    detail = _anti_hacking_detail(res)
    assert "sgemm_" in detail or "replaced" in detail, detail


@pytest.mark.slow
def test_a_forked_decoy_does_not_hide_the_process_that_works(task_source, hostile_config):
    """The harness forks at import: the parent (the pid the verifier finds first) idles in waitpid, the
    child serves the run with a kernel importing sgemm_ that only it loaded."""
    source = HEAD + BLAS_CPP + '''
_pid = os.fork()
if _pid:
    os.waitpid(_pid, 0)
    os._exit(0)
_blas = load_inline(name="evk_audit_fork", cpp_sources=[BLAS], functions=["kernel_forward"], extra_cflags=["-O3"])
''' + HIDE.format(tag="fork") + MODEL
    res = verify(task_source("relu"), source, config=hostile_config())
    assert not res.feasible, res.feedback()
    assert "sgemm_" in _anti_hacking_detail(res)


def test_an_unparsable_kernel_object_is_a_failure(tmp_path):
    from verifier.policy.binary_audit import KERNEL, audit

    bad = tmp_path / "kernel.o"
    bad.write_bytes(b"\x7fELF" + secrets.token_bytes(64))
    found = audit_objects([bad], lambda p: audit(p, profile=KERNEL))
    assert found and found[0][0] == "binary-import" and "cannot be audited" in found[0][1], found


def _map_exec(path: Path):
    fh = open(path, "rb")  # noqa: SIM115 - kept open with the mapping
    mem = mmap.mmap(fh.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
    maps = parse_maps(os.getpid(), Path("/proc/self/maps").read_text())
    [m] = [m for m in maps if m.path == str(path)]
    return fh, mem, m


def test_the_mapped_object_is_read_even_after_its_file_is_replaced(tmp_path):
    lib = tmp_path / "k.so"
    lib.write_bytes(b"mapped " * 1000)
    fh, mem, m = _map_exec(lib)
    try:
        (tmp_path / "clean").write_bytes(b"clean! " * 1000)
        os.replace(tmp_path / "clean", lib)
        try:
            fd = open_mapped(m)
        except OSError as exc:  # no map_files here (an ordinary user): the path fallback sees the swap
            assert "replaced" in str(exc)
            return
        with os.fdopen(fd, "rb") as got:
            assert got.read(6) == b"mapped"
    finally:
        mem.close()
        fh.close()


def test_without_map_files_a_replaced_file_fails_and_an_unchanged_one_is_read(tmp_path, monkeypatch):
    lib = tmp_path / "k.so"
    lib.write_bytes(b"mapped " * 1000)
    fh, mem, m = _map_exec(lib)
    real_open = os.open

    def no_map_files(path, *a, **kw):
        if "/map_files/" in str(path):
            raise PermissionError(1, "Operation not permitted")
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "open", no_map_files)
    try:
        fd = open_mapped(m)
        os.close(fd)
        (tmp_path / "clean").write_bytes(b"clean! " * 1000)
        os.replace(tmp_path / "clean", lib)
        with pytest.raises(OSError, match="replaced"):
            open_mapped(m)
        deleted = Mapping(m.pid, m.start, m.end, m.perms, m.dev, m.inode, m.path, True)
        with pytest.raises(OSError, match="deleted"):
            open_mapped(deleted)
    finally:
        mem.close()
        fh.close()


def test_which_mappings_are_audited():
    trusted = [Path("/usr"), Path("/dev"), Path("/tmp/venv")]
    job = Path("/dev/shm/evk/run-1/job")
    assert is_candidate_writable("/dev/shm/evk/run-1/job/build/ext/a/k.so", job, trusted)
    assert is_candidate_writable("/dev/shm/other.so", job, trusted)  # /dev is trusted, /dev/shm is not
    assert is_candidate_writable("/memfd:x", job, trusted)
    assert is_candidate_writable("/opt/anything.so", job, trusted)
    assert not is_candidate_writable("/usr/lib/libc.so.6", job, trusted)
    assert not is_candidate_writable("/tmp/venv/lib/torch.so", job, trusted)


# ---------------------------------------------------------------------------------------------------
# 3. a kernel-call claim needs a mapped kernel object (unit: the rule in _Run.audit)
# ---------------------------------------------------------------------------------------------------


def test_kernel_call_claim_without_a_mapped_object_fails(monkeypatch, tmp_path):
    from verifier import api
    from verifier.policy import mapped_audit

    class Be:
        name, counts_kernel_calls = "cpu", True

    class Cfg:
        def root(self):
            return tmp_path

    run = api._Run.__new__(api._Run)
    run.be, run.config, run.job_dir, run.harness_pid = Be(), Cfg(), tmp_path / "job", os.getpid()
    run.audit_findings = []
    run.candidate = {"builds": [{"name": "k"}], "kernel_calls": [1, 1]}
    monkeypatch.setattr(mapped_audit, "audit_namespace",
                        lambda *a, **k: mapped_audit.NamespaceAudit([], 1, [], {}))
    run.audit()
    assert run.audit_findings == []  # the first audit runs before any call
    run.audit()
    assert [r for r, _ in run.audit_findings] == ["kernel-not-mapped"]


def test_a_dead_sandbox_is_named_and_a_failed_correctness_gate_keeps_its_own_reason(monkeypatch, tmp_path):
    """The last audit found no process (the harness had died, e.g. out of device memory under a cap): the
    finding says so; where correctness already failed the verdict is that gate's, not this rule's. A run
    whose correctness passed keeps the finding whatever happened to its process (dying in the timing
    window, where a failed gate does not make the verdict infeasible, must not shed it)."""
    from verifier import api
    from verifier.policy import mapped_audit

    class Be:
        name, counts_kernel_calls = "cpu", True

    class Cfg:
        def root(self):
            return tmp_path

    def fresh():
        run = api._Run.__new__(api._Run)
        run.be, run.config, run.job_dir, run.harness_pid = Be(), Cfg(), tmp_path / "job", os.getpid()
        run.audit_findings = []
        run.candidate = {"builds": [{"name": "k"}], "kernel_calls": [1, 1]}
        run.audit()
        return run

    monkeypatch.setattr(mapped_audit, "audit_namespace", lambda *a, **k: mapped_audit.NamespaceAudit([], 0, [], {}))
    failed = fresh()
    failed.audit(run_failed=True)
    assert failed.audit_findings == []
    passed = fresh()
    passed.audit(run_failed=False)
    ((rule, text),) = passed.audit_findings
    assert rule == "kernel-not-mapped" and "no process was left" in text


# ---------------------------------------------------------------------------------------------------
# 4. trusted builds end with their verification
# ---------------------------------------------------------------------------------------------------


def _build_processes(root: Path) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"verifier.build.shared_artefacts" in cmd and b"--shared" in cmd and str(root).encode() in cmd:
                out.append(int(entry))
    return out


@pytest.mark.alone
@pytest.mark.slow
def test_shared_builds_do_not_outlive_the_verification(task_source, make_config, tmp_path):
    """Ask for several full precompiled headers (hundreds of MB each), then fail at once: before, the
    trusted compilers ran on after the verdict and left half-written .gch files."""
    root = tmp_path / "root"
    source = HEAD + '''
from verifier.workers.harness import request_artefact
for _i in range(4):
    request_artefact("pch", {"kind": "evk_full", "cflags": ["-O2", f"-DEVK_AUDIT_{_i}=1"]}, wait=False)
raise SystemExit("done asking")
''' + MODEL
    res = verify(task_source("relu"), source, config=make_config(static_scan=False, build_root=str(root)))
    assert not res.feasible
    deadline = time.monotonic() + 5
    while _build_processes(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _build_processes(root) == []
    leftovers = [p for p in (root / "shared").rglob("*") if ".tmp" in p.name] if (root / "shared").exists() else []
    assert leftovers == []


@pytest.mark.alone
def test_concurrent_trusted_builds_are_capped(tmp_path):
    from verifier.build import owned_builds as trusted_builds

    builds = trusted_builds.TrustedBuilds(tmp_path)
    started = []
    argv = ["/bin/sh", "-c", "sleep 30"]
    threads = [trusted_builds.run_in_background(builds, argv, {}, tmp_path / f"{i}.log", 60, lambda: None, "t")
               for i in range(trusted_builds.MAX_CONCURRENT + 2)]
    deadline = time.monotonic() + 5
    while len(builds.alive()) < trusted_builds.MAX_CONCURRENT and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    started = builds.alive()
    (tmp_path / f"x.gch.tmp{started[0]}").write_text("half")
    builds.close()
    for t in threads:
        t.join(timeout=10)
    assert len(started) == trusted_builds.MAX_CONCURRENT
    assert builds.alive() == [] and builds.killed == len(started)
    assert builds.leftovers == 1 and not (tmp_path / f"x.gch.tmp{started[0]}").exists()


# ---------------------------------------------------------------------------------------------------
# 5. host files never reach a verdict; candidate text is bounded
# ---------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_host_files_do_not_reach_the_verdict(task_source, make_config):
    """Read /etc/shadow (and a secret placed in /etc for the test) and raise the content as an error."""
    secret = "evk-secret-" + secrets.token_hex(8)
    planted = Path("/etc") / f"evk-audit-{secrets.token_hex(4)}"
    try:
        planted.write_text(secret + "\n")
    except OSError:
        pytest.skip("cannot place a file in /etc (not root)")
    shadow = ""
    try:
        shadow = Path("/etc/shadow").read_text().splitlines()[0]
    except (OSError, IndexError):
        pass
    try:
        source = HEAD + f'''
_seen = []
for _p in ("/etc/shadow", "{planted}", "/etc/hostname"):
    try:
        _seen.append(bytes(torch.from_file(_p, size=os.path.getsize(_p), dtype=torch.uint8).tolist()).decode())
    except Exception as _e:
        _seen.append(open(_p).read() if os.path.exists(_p) else repr(_e))
raise RuntimeError(" | ".join(_seen) + "A" * 100000)
''' + MODEL
        res = verify(task_source("relu"), source, config=make_config(static_scan=False))
    finally:
        planted.unlink()
    assert not res.feasible
    text = json.dumps(res.to_dict()) + res.feedback()
    assert secret not in text
    if shadow:
        assert shadow not in text
    assert len(text) < 30000, len(text)
