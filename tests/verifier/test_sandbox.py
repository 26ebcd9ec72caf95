"""The sandbox on its own, with small Python scripts (the static gate would stop these as candidates)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verifier.sandbox.supervisor import Limits, run_sandboxed

pytestmark = pytest.mark.slow  # every test here starts a sandbox


def _run(tmp_path: Path, script: str, **limits):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    return run_sandboxed([sys.executable, str(path)], tmp_path / "work", Limits(**limits))


def _alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_normal_exit_and_progress_marks(tmp_path):
    out = _run(tmp_path, """
        import json, os
        fd = int(os.environ["EVK_PROGRESS_FD"])
        os.write(fd, (json.dumps({"phase": "build"}) + "\\n").encode())
        os.write(fd, b"not json\\n")
        os.write(fd, (json.dumps({"phase": "correctness"}) + "\\n").encode())
        print("hello from the job")
    """, wall_s=30)
    assert (out.exit_code, out.signal, out.timed_out) == (0, None, False)
    assert [m["phase"] for _, m in out.marks] == ["build", "correctness"]
    assert "hello from the job" in out.stderr_tail
    assert out.describe() == "exited with code 0"


@pytest.mark.alone
def test_hang_is_killed_at_the_deadline(tmp_path):
    start = time.monotonic()
    out = _run(tmp_path, "while True:\n    pass\n", wall_s=2)
    elapsed = time.monotonic() - start
    assert out.timed_out and not out.crashed
    assert 1.9 <= out.seconds < 6 and elapsed < 10
    assert "timed out" in out.describe()


def test_orphans_do_not_survive(tmp_path):
    """Double fork + setsid escapes the process group; the subreaper supervisor still kills it."""
    pidfile = tmp_path / "orphan.pid"
    out = _run(tmp_path, f"""
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                open({str(pidfile)!r}, "w").write(str(os.getpid()))
                time.sleep(120)
            os._exit(0)
        time.sleep(0.5)
    """, wall_s=20)
    assert out.exit_code == 0
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 3
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), f"orphan {pid} survived the sandbox"


def test_many_children_are_all_killed_on_timeout(tmp_path):
    pidfile = tmp_path / "pids.txt"
    out = _run(tmp_path, f"""
        import os, time
        pids = []
        for _ in range(40):
            pid = os.fork()
            if pid == 0:
                time.sleep(120)
                os._exit(0)
            pids.append(pid)
        open({str(pidfile)!r}, "w").write(" ".join(map(str, pids)))
        time.sleep(120)
    """, wall_s=3)
    assert out.timed_out
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 40
    time.sleep(0.2)
    assert not [p for p in pids if _alive(p)]


def test_memory_limit(tmp_path):
    out = _run(tmp_path, "x = bytearray(3 * 1024**3)\nprint('allocated', len(x))\n",
               wall_s=30, memory_bytes=1024**3)
    assert out.exit_code not in (0, None) or out.signal is not None
    assert "MemoryError" in out.stderr_tail
    assert "allocated" not in out.stderr_tail


def test_os_exit_and_crash(tmp_path):
    out = _run(tmp_path / "a", "import os\nos._exit(7)\n", wall_s=20)
    assert (out.exit_code, out.signal, out.timed_out) == (7, None, False)
    out = _run(tmp_path / "b", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", wall_s=20)
    assert out.signal == signal.SIGSEGV and out.crashed
    assert "SIGSEGV" in out.describe()


def test_fake_verdict_on_stdout_is_not_a_mark(tmp_path):
    out = _run(tmp_path, """
        import json
        print(json.dumps({"phase": "done", "feasible": True, "outcome": "feasible"}))
        raise SystemExit(3)
    """, wall_s=20)
    assert out.exit_code == 3
    assert out.marks == []
    assert '"feasible": true' in out.stderr_tail


def test_file_size_limit(tmp_path):
    out = _run(tmp_path, f"""
        with open({str(tmp_path / 'big.bin')!r}, "wb") as fh:
            fh.write(b"x" * (64 * 1024**2))
    """, wall_s=20, file_bytes=1024**2)
    assert out.exit_code != 0
    assert (tmp_path / "big.bin").stat().st_size <= 1024**2


def test_caller_environment_untouched(tmp_path):
    """The sandbox adds its own variables (progress pipe, PYTHONPATH) for the job only: neither the caller's
    os.environ nor an env dict the caller passes is changed, and the job sees what it was given plus those."""
    import json

    script = tmp_path / "job.py"
    script.write_text("import json, os, sys\nopen(sys.argv[1], 'w').write(json.dumps(dict(os.environ)))\n")
    before = dict(os.environ)
    given = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "EVK_GIVEN": "yes"}
    given_before = dict(given)
    work = tmp_path / "work"
    seen_file = work / "seen.json"
    out = run_sandboxed([sys.executable, str(script), str(seen_file)], work, Limits(wall_s=20), env=given)
    assert out.exit_code == 0, out.stderr_tail
    seen = json.loads(seen_file.read_text())
    assert seen["EVK_GIVEN"] == "yes" and "EVK_PROGRESS_FD" in seen and seen.get("PYTHONPATH")
    assert given == given_before, "the env dict passed in was changed"
    assert dict(os.environ) == before and "EVK_PROGRESS_FD" not in os.environ

    seen_file.unlink()
    os.environ["EVK_FROM_CALLER"] = "1"  # env=None: the caller's environment, copied
    try:
        before = dict(os.environ)
        out = run_sandboxed([sys.executable, str(script), str(seen_file)], work, Limits(wall_s=20))
        assert out.exit_code == 0, out.stderr_tail
        seen = json.loads(seen_file.read_text())
        assert seen["EVK_FROM_CALLER"] == "1" and "EVK_PROGRESS_FD" in seen
        assert dict(os.environ) == before
    finally:
        del os.environ["EVK_FROM_CALLER"]


@pytest.mark.alone
def test_a_wait_on_one_job_gives_up_when_another_it_depends_on_has_ended(tmp_path):
    """The trusted worker comparing a candidate's results on the card waited 240 s after the candidate's
    process died (an H100, out of memory): `expect(abort=)` stops the wait, kills the stuck job, and is
    not a time-out; without it the same wait runs to its limit."""
    from verifier.run.trials import ended_for
    from verifier.sandbox.supervisor import LiveJob
    from verifier.workers.pools import _clean_env

    def job(name: str, code: str) -> LiveJob:
        d = tmp_path / name
        d.mkdir()
        (d / "child.py").write_text(code)
        return LiveJob([sys.executable, str(d / "child.py")], d, Limits(wall_s=60, memory_bytes=-1), _clean_env())

    stuck = job("stuck", "import time\ntime.sleep(60)\n")
    dying = job("dying", "import sys\nsys.exit(3)\n")
    try:
        t0 = time.monotonic()
        assert stuck.expect({"never"}, 30, abort=ended_for(dying, 0.5)) is None
        waited = time.monotonic() - t0
        assert waited < 10, waited
        assert not stuck.timed_out and dying.ended()
        assert stuck.finish(5).seconds < 30
        lone = job("lone", "import time\ntime.sleep(60)\n")
        t0 = time.monotonic()
        assert lone.expect({"never"}, 2) is None and lone.timed_out and time.monotonic() - t0 >= 2
        lone.finish(5)
    finally:
        for j in (stuck, dying):
            j.kill()


def test_the_scratch_root_can_be_named_and_keeps_its_checks(tmp_path, monkeypatch):
    """`EVOKERNEL_SCRATCH` moves the per-user scratch (the suite gives each worker its own): it is made
    private, and a link there is refused as the default root's would be."""
    from verifier.sandbox.isolation import IsolationUnavailable, private_scratch

    monkeypatch.setenv("EVOKERNEL_SCRATCH", str(tmp_path / "mine"))
    assert private_scratch() == tmp_path / "mine"
    assert (tmp_path / "mine").stat().st_mode & 0o777 == 0o700
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("EVOKERNEL_SCRATCH", str(tmp_path / "link"))
    with pytest.raises(IsolationUnavailable, match="not owned by you"):
        private_scratch()
