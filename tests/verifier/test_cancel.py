"""Cancelling leaves nothing: `evokernel verify` killed with SIGTERM, SIGINT (to the main process alone, as
`timeout`, a process manager or a parent sends them) or SIGKILL, during its task checks or its trials, leaves
no process behind within a few seconds, and SIGTERM/SIGINT end it in one line with 143/130.

The command's process tree is read from /proc while it runs (every descendant remembered with its start
time, so one reparented to init after the kill is still found, and a reused pid is not mistaken for it)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from verifier.sandbox import lifetime
from verifier.sandbox.procs import children_map, pid_alive

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = ROOT / "tests" / "candidates"
TASK = CANDIDATES / "kernelbench" / "KernelBench" / "level1" / "19_ReLU.py"
KERNEL = CANDIDATES / "cpu" / "relu.py"
OURS = (b"verifier", b"task_probe", b"bwrap", b"shared_artefacts", b"cc1plus", b"evokernel")
COMPILERS = (b"cc1plus", b"/as\0", b"collect2", b"/ld\0", b"shared_artefacts")
GONE_WITHIN_S = 5.0
# alone (tests/conftest.py): each test reads the process tree it started and gives it GONE_WITHIN_S to end
pytestmark = pytest.mark.alone


def _pythonpath() -> str:
    """The checkout first, then what the caller's PYTHONPATH already had (wheels carried to a GPU machine)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def _proc(pid: int) -> tuple[bytes, bytes] | None:
    """(start time, command line) of a live pid, None when it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, IndexError):
        return None
    if stat[0] == b"Z":
        return None
    return stat[19], cmdline


def _descendants(root: int) -> list[int]:
    kids = children_map()
    out, todo = [], [root]
    while todo:
        for child in kids.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Tree:
    """Every process that descended from `root` while it was watched."""

    def __init__(self, root: int):
        self.root = root
        self.seen: dict[int, tuple[bytes, bytes]] = {}

    def poll(self) -> list[bytes]:
        now = []
        for pid in _descendants(self.root):
            info = _proc(pid)
            if info is not None:
                self.seen.setdefault(pid, info)
                now.append(info[1])
        return now

    def left(self) -> list[str]:
        """Remembered processes of ours still alive (same pid and start time), and live descendants."""
        alive = []
        for pid, (start, cmdline) in {**self.seen}.items():
            info = _proc(pid)
            if info is not None and info[0] == start and any(word in cmdline for word in OURS):
                text = cmdline.replace(b"\0", b" ").decode(errors="replace")[:160]
                alive.append(f"{pid}: {text}")
        return alive

    def kill_left(self) -> None:
        for pid, (start, _cmd) in self.seen.items():
            info = _proc(pid)
            if info is not None and info[0] == start:
                os.kill(pid, signal.SIGKILL)


def _wait_for(tree: Tree, proc: subprocess.Popen, phase: str, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    harness_since = None
    quiet_since = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"verify ended before the {phase} phase: {proc.stderr.read()[-2000:]}"
        cmdlines = tree.poll()
        joined = b"\n".join(cmdlines)
        if phase == "task_checks" and b"task_probe" in joined:
            return
        if phase == "workers" and b"verifier.workers.reference_worker" in joined:
            return
        if phase == "trials" and b"verifier.workers.harness" in joined and b"reference_worker" in joined:
            harness_since = harness_since or time.monotonic()
            building = any(c in line + b"\0" for line in cmdlines for c in COMPILERS)
            quiet_since = None if building else (quiet_since or time.monotonic())
            if quiet_since and time.monotonic() - quiet_since > 0.5 and time.monotonic() - harness_since > 1.0:
                return
        time.sleep(0.02)
    pytest.fail(f"verify never reached its {phase} phase")


def _start_verify(tmp_path: Path) -> tuple[subprocess.Popen, Tree]:
    task = tmp_path / "relu_task.py"
    # a source of its own: the task checks' cached results (per source) do not skip the probe; a slow
    # reference (0.3 s a call): the trusted reference worker is busy computing, not reading its control
    # pipe, when the command is killed, so only a tie to its parent's life ends it
    source = TASK.read_text().replace("        return torch.relu(x)", "        time.sleep(0.3)\n        return torch.relu(x)")
    task.write_text("import time\n" + source + f"\n# {uuid.uuid4().hex}\n")
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "PYTHONPATH": _pythonpath(), "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen([sys.executable, "-m", "evokernel_tui.cli", "verify", str(task), str(KERNEL),
                             "--no-cache", "--trials", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env,
                            cwd=ROOT, start_new_session=True, text=True)
    return proc, Tree(proc.pid)


def _runs_of(pid: int) -> list[Path]:
    """The run directories (`verifier.workers.pools._new_run_dir`) that process `pid` owns in the scratch:
    found by their `.owner`, since other verifications share the scratch."""
    from verifier.sandbox.isolation import private_scratch

    out = []
    for owner in (private_scratch() / "runs").glob("run-*/.owner"):
        try:
            if owner.read_text().strip() == str(pid):
                out.append(owner.parent)
        except OSError:
            continue
    return out


def _cancel(tmp_path: Path, phase: str, sig: signal.Signals) -> None:
    proc, tree = _start_verify(tmp_path)
    try:
        _wait_for(tree, proc, phase)
        tree.poll()
        runs = _runs_of(proc.pid)
        if phase == "trials":
            assert runs, "a verification in its trials has a run directory"
        os.kill(proc.pid, sig)  # the main process alone, as `timeout` or a parent sends it
        started = time.monotonic()
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"verify did not exit within 30 s of {sig.name}")
        deadline = started + GONE_WITHIN_S
        left = tree.left()
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = tree.left()
        assert not left, f"{sig.name} during {phase} left {len(left)} process(es) behind:\n" + "\n".join(left)
        # nothing of the job on the host: its directory was a tmpfs of the sandbox's own, gone with it
        for run in runs:
            job = run / "job"
            assert not job.is_dir() or not any(job.iterdir()), f"{sig.name} left files in {job}"
        # torch's compile cache (the reference worker's `torch.compile` timing) is a cache kept by design
        tmp_left = sorted(p.name for p in (tmp_path / "tmp").iterdir() if not p.name.startswith("torchinductor_"))
        assert not tmp_left, f"{sig.name} during {phase} left {tmp_left} in its TMPDIR"
        if sig == signal.SIGKILL:  # nothing of ours ran: the next verification's sweep removes the run
            from verifier.sandbox.isolation import clean_stale_runs, private_scratch

            clean_stale_runs(private_scratch())
        left_runs = [r.name for r in runs if r.exists()]
        assert not left_runs, f"{sig.name} during {phase} left its run directories {left_runs}"
        err = proc.stderr.read()
        if sig == signal.SIGKILL:
            assert code == -signal.SIGKILL
        else:
            assert code == 128 + sig, (code, err[-3000:])
            assert "Traceback" not in err, err[-3000:]
            assert "interrupted" in err, err[-3000:]
            # issue 34: what was stopped and where, as `bench` says it
            stopped = next(line for line in err.splitlines() if "interrupted" in line)
            assert f"stopped verifying {KERNEL.name} against relu_task during " in stopped, stopped
            assert re.search(r"during .+, \d+ s in; no verdict$", stopped), stopped
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        tree.kill_left()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_cancel_during_task_checks(tmp_path, sig):
    _cancel(tmp_path, "task_checks", sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_cancel_while_workers_start(tmp_path, sig):
    _cancel(tmp_path, "workers", sig)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_cancel_during_trials(tmp_path, sig):
    _cancel(tmp_path, "trials", sig)


def test_child_started_from_a_finished_thread_dies_with_its_parent(tmp_path):
    """The parent-death signal is tied to the forking thread: a child `spawn`ed for a short-lived thread
    must outlive that thread, and die when its parent process is SIGKILLed."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, threading, time\n"
        "from verifier.sandbox import lifetime\n"
        "box = []\n"
        "t = threading.Thread(target=lambda: box.append(lifetime.spawn([sys.executable, '-c', "
        "'import time; time.sleep(120)'])))\n"
        "t.start(); t.join(); time.sleep(0.3)\n"
        "print(box[0].pid, box[0].poll(), flush=True)\n"
        "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": _pythonpath()}, start_new_session=True)
    try:
        child, status = parent.stdout.readline().split()
        assert status == "None", "the child died with the thread that asked for it"
        assert pid_alive(int(child))
        parent.kill()
        parent.wait()
        assert lifetime.wait_gone([int(child)], 3.0) == [], "the child outlived its SIGKILLed parent"
    finally:
        parent.kill()
        parent.wait()


def _exiting(tmp_path: Path, tail: str) -> list[str]:
    script = tmp_path / "exiting.py"
    script.write_text(
        "import sys, threading, time\n"
        "from verifier.errors import VerifierError\n"
        "from verifier.workers import pools\n"
        "made = threading.Event()\n"
        "def start():\n"
        "    run = pools._new_run_dir()\n"
        "    print(run, flush=True)\n"
        "    made.set()\n"
        "    time.sleep(60)\n"
        "pools._SPARES.refill('key', start)\n"
        "assert made.wait(30)\n" + tail)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": _pythonpath()})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_a_run_directory_made_while_the_process_exits_is_removed(tmp_path):
    """A spare sandbox being started on its daemon thread when the process is told to stop made its run
    directory after the pools had closed (1 in ~15 `test_cancel_while_workers_start[SIGTERM]` runs left it):
    at exit every run directory the process made is removed, and none is made after that sweep."""
    run = Path(_exiting(tmp_path, "")[0])  # the process exits while the spare's start is under way
    assert run.name.startswith("run-") and run.parent.name == "runs"
    assert not run.exists(), "the run directory of the spare being started outlived its process"
    lines = _exiting(tmp_path, "pools._sweep_own_runs()\n"
                               "try:\n"
                               "    pools._new_run_dir()\n"
                               "except VerifierError as exc:\n"
                               "    print('refused:', exc, flush=True)\n")
    assert not Path(lines[0]).exists()
    assert lines[1].startswith("refused: the verifier is shutting down"), lines
