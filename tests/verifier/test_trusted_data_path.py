"""The trusted data path (issue 21): how the parent reads what a candidate wrote, and how it cleans up.

Hostile candidates (static scan off) that won a held-out round against the old code:
* a timed-round directory renamed and replaced by a link to the reference's round directory once the
  harness saved its outputs (the old parent resolved the link and compared the reference with itself);
* `after.json` or an output replaced by a FIFO (the old parent's open() blocked forever) or a socket;
* a 3000-deep chain of directories in the job (`shutil.rmtree` raised RecursionError out of verify(),
  and `clean_stale_runs` then failed every later verification on that scratch);
* a kernel wrong on one timed call that the old per-round sample of 1-2 calls usually missed.
The candidates patch `verifier.sandbox.channel.Channel.mark` to act between the harness writing its files and
the parent reading them: a candidate owns its process, so nothing in it can be trusted to stop that.
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.verifier.test_isolation import RELU_EXT  # the same shared-extension relu as the isolation tests
from verifier import verify

pytestmark = pytest.mark.slow

PREAMBLE = '''import os, re, sys, socket
from pathlib import Path
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
import verifier.sandbox.channel as _ch
JOB = Path(sys.argv[1])
_orig_mark = _ch.Channel.mark
STATE = {"timing": 0, "call": 0}
'''


# right during the correctness trials and the profile, garbage once timing started
FAKE_WHEN_TIMING = '''
class ModelNew(nn.Module):
    def forward(self, x):
        if STATE["timing"]:
            return torch.full_like(x, 7.0)
        return _ext.kernel_forward(x)
'''

# calls the kernel, then overwrites its answer: garbage in every call
FAKE_ALWAYS = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.kernel_forward(x).fill_(7.0)
'''

HONEST_MODEL = '''
class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.kernel_forward(x)
'''

SWAP_FOR_LINK = '''
def _swap(pattern, target):
    for d in list(JOB.iterdir()):
        m = re.match(pattern, d.name)
        if m and d.is_dir() and not d.is_symlink():
            d.rename(JOB / ("gone-" + d.name))
            d.symlink_to(target.format(*m.groups()))

def _mark(self, phase, **extra):
    if phase == "timing_start":
        STATE["timing"] += 1
    if phase == "saved":
        _swap(r"r(\\d+)-[0-9a-f]+$", "../trusted/round{0}")
    if phase == "trial_done" and {trial!r}:
        _swap(r"t(\\d+)-[0-9a-f]+$", "../trusted/trial{0}")
    return _orig_mark(self, phase, **extra)

_ch.Channel.mark = _mark
'''

REPLACE_FILE = '''
def _replace(path):
    path.unlink()
    if {kind!r} == "fifo":
        os.mkfifo(path)
    elif {kind!r} == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        KEEP.append(s)
    else:
        path.symlink_to("/etc/passwd")

KEEP = []

def _mark(self, phase, **extra):
    if phase == "trial_done":
        for d in JOB.iterdir():
            if re.match(r"t\\d+-[0-9a-f]+$", d.name) and (d / {name!r}).exists():
                _replace(d / {name!r})
    return _orig_mark(self, phase, **extra)

_ch.Channel.mark = _mark
'''

DEEP_CHAIN = '''
_fd = os.open(JOB, os.O_RDONLY)
for _ in range(3000):
    os.mkdir("d", dir_fd=_fd)
    _next = os.open("d", os.O_RDONLY, dir_fd=_fd)
    os.close(_fd)
    _fd = _next
os.mkfifo("fifo", dir_fd=_fd)
os.close(_fd)
'''

# wrong on one call only: the 4th call of the second timed round after calibration
WRONG_ONCE = '''
def _mark(self, phase, **extra):
    if phase == "timing_start":  # a timed round starts (or its own stub round, which calls no forward)
        STATE["fresh"] = True
    return _orig_mark(self, phase, **extra)

_ch.Channel.mark = _mark

class ModelNew(nn.Module):
    def forward(self, x):
        out = _ext.kernel_forward(x)
        if STATE.get("fresh"):
            STATE["timing"] += 1
            STATE["call"] = 0
            STATE["fresh"] = False
        if STATE["timing"]:
            STATE["call"] += 1
            if STATE["timing"] == 3 and STATE["call"] == 4:
                out.fill_(7.0)
        return out
'''


def candidate(body: str, model: str = "") -> str:
    return PREAMBLE + RELU_EXT + body + model


@pytest.fixture()
def hostile_config(make_config):
    return lambda **kw: make_config(static_scan=False, **kw)


def _verify_or_hang(*args, timeout: float = 600, **kw):
    """verify() in a thread: a parent blocked on a FIFO shows as a failed test, not a stuck run."""
    box: dict = {}

    def run() -> None:
        try:
            box["res"] = verify(*args, **kw)
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["exc"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    assert not t.is_alive(), "verify() hung on a file the candidate left"
    if "exc" in box:
        raise box["exc"]
    return box["res"]


@pytest.mark.alone
@pytest.mark.parametrize("where", ["round", "trial"])
def test_a_directory_swapped_for_a_link_to_the_reference_is_not_followed(where, task_source, hostile_config):
    """After the harness saved its (garbage) outputs, the candidate renames its hand-over directory and
    links the name to the reference's directory. The old parent resolved the link and compared the
    reference's files with themselves (the round variant passed with garbage outputs); now every read
    goes through the descriptor held since the directory was made, which sees the garbage."""
    body = SWAP_FOR_LINK.replace("{trial!r}", repr(where == "trial"))
    model = FAKE_WHEN_TIMING if where == "round" else FAKE_ALWAYS
    # the data path itself: a kernel skipped on the swapped round is its own rule, allowed here
    res = _verify_or_hang(task_source("relu"), candidate(body, model), config=hostile_config(timing="full", allow=["custom-kernel-skipped"]))
    assert not res.feasible, res.feedback()
    gate = res.failed_gate
    assert gate.name == "correctness", res.feedback()
    if where == "round":
        assert gate.detail.get("during") == "timing", res.feedback()


@pytest.mark.parametrize("name,kind", [("after.json", "fifo"), ("out0.npy", "fifo"), ("out0.npy", "socket"),
                                       ("after.json", "link")])
def test_a_result_file_that_is_not_a_regular_file_fails_without_hanging(name, kind, task_source, hostile_config):
    """`after.json` (or an output) swapped for a FIFO once the harness wrote it: the old parent's open()
    waited for a writer forever. Reads are now opened non-blocking and must be regular files."""
    body = REPLACE_FILE.replace("{kind!r}", repr(kind)).replace("{name!r}", repr(name))
    res = _verify_or_hang(task_source("relu"), candidate(body, HONEST_MODEL), config=hostile_config(), timeout=300)
    assert not res.feasible, res.feedback()
    assert res.failed_gate.name == "correctness", res.feedback()
    words = {"fifo": "FIFO", "socket": "socket", "link": "link"}[kind]
    assert words in res.failed_gate.reason and name in res.failed_gate.reason, res.failed_gate.reason


# (not `alone` since session 15: the scratch whose trash it reads is this test process's own, tests/conftest.py)
def test_a_deep_directory_chain_is_removed_and_the_next_verification_runs(task_source, hostile_config, kernel_source):
    """3000 nested directories (and a FIFO at the bottom) in the job: the old `shutil.rmtree` raised
    RecursionError out of verify(). Now the run passes on its merits, its directory is removed, and
    the next verification on the same scratch is unaffected."""
    from tests.verifier.conftest import RELU_BODY
    from verifier.api import _scratch

    res = _verify_or_hang(task_source("relu"), candidate(DEEP_CHAIN, HONEST_MODEL), config=hostile_config())
    assert res.feasible, res.feedback()
    runs = _scratch() / "runs"
    assert not [p for p in runs.glob("run-*/job/d")], "the run with the deep chain was left behind"
    assert not (_scratch() / "trash").exists() or not list((_scratch() / "trash").iterdir())
    honest = verify(task_source("relu"), kernel_source(RELU_BODY), config=hostile_config())
    assert honest.feasible, honest.feedback()


@pytest.mark.alone
def test_every_timed_call_is_checked(task_source, hostile_config):
    """Wrong on a single timed call (the 4th of the second timed round): a sample of 1-2 calls per round
    missed it more often than not; every call's outputs are compared now."""
    config = hostile_config(timing="full", timing_memory_mb=1024.0, round_target_ms=400.0)
    res = _verify_or_hang(task_source("relu"), candidate("", WRONG_ONCE), config=config)
    assert not res.feasible, res.feedback()
    gate = res.failed_gate
    assert gate.name == "correctness" and gate.detail.get("during") == "timing", res.feedback()
    assert "timed call 4 of round 3" in gate.reason, gate.reason


@pytest.mark.alone
def test_latency_reports_how_many_timed_calls_were_checked(task_source, make_config, kernel_source):
    from tests.verifier.conftest import RELU_BODY

    res = verify(task_source("relu"), kernel_source(RELU_BODY), config=make_config(timing="full", timing_memory_mb=1024.0))
    assert res.feasible, res.feedback()
    lat = next(g for g in res.gates if g.name == "latency")
    d = lat.detail
    # every timed call: the calibration call, the warm-up rounds' and the counted rounds'
    assert d["checked_calls"] == d["sampled_checks"] == d["runs"] + 1 + d["warmup_rounds"] * d["calls_per_round"]


# ---------------------------------------------------------------------------------------------------
# the pieces on their own (no build)


def _deep_tree(root: Path, depth: int, outside: Path) -> None:
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        if i % 500 == 0:
            os.mkfifo("fifo", dir_fd=fd)
            os.symlink(outside, "link", dir_fd=fd)
            os.close(os.open("file", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        if i in (1000, 2000):
            os.fchmod(fd, 0o500)  # no write: entries cannot be unlinked until it is given back
        if i == 3000:
            os.fchmod(fd, 0o000)
        os.close(fd)
        fd = nxt
    os.close(fd)


def test_remover_takes_a_5000_deep_tree_without_following_links(tmp_path):
    from verifier.sandbox.job_dir import remove_tree

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    _deep_tree(tmp_path / "run", 5000, outside)
    assert remove_tree(tmp_path / "run", budget_s=None)
    assert not (tmp_path / "run").exists()
    assert (outside / "keep.txt").read_text() == "keep"


def test_clean_stale_runs_survives_deep_trees_and_never_raises(tmp_path):
    from verifier.sandbox.isolation import clean_stale_runs

    scratch = tmp_path / "scratch"
    (scratch / "runs").mkdir(parents=True)
    dead = scratch / "runs" / "run-dead"
    _deep_tree(dead, 1200, tmp_path)
    (dead / ".owner").write_text("999999999")
    alive = scratch / "runs" / "run-alive"
    alive.mkdir()
    (alive / ".owner").write_text(str(os.getpid()))
    (scratch / "trash").mkdir()
    _deep_tree(scratch / "trash" / "run-old", 600, tmp_path)
    assert clean_stale_runs(scratch) == 2
    assert not dead.exists() and alive.exists() and not list((scratch / "trash").iterdir())
    clean_stale_runs(tmp_path / "missing")  # nothing there: still no exception


def test_out_of_time_moves_the_run_to_trash(tmp_path):
    from verifier.sandbox.job_dir import discard

    runs = tmp_path / "runs"
    runs.mkdir()
    _deep_tree(runs / "run-x", 200, tmp_path)
    assert discard(runs / "run-x", tmp_path / "trash", budget_s=0.0) is False
    assert not (runs / "run-x").exists() and len(list((tmp_path / "trash").iterdir())) == 1


def test_held_directory_is_read_even_after_a_swap(tmp_path):
    """compare_files through a held descriptor: the renamed-and-linked directory changes nothing."""
    from verifier.config import VerifyConfig
    from verifier.gates.evidence import compare_files
    from verifier.sandbox.job_dir import create_held

    job, ref = tmp_path / "job", tmp_path / "trusted" / "round1"
    job.mkdir()
    ref.mkdir(parents=True)
    np.save(ref / "s0_out0.npy", np.ones(4, dtype=np.float32))
    held = create_held(tmp_path / "stage", job, "r1-abc")
    np.save(job / "r1-abc" / "s0_out0.npy", np.zeros(4, dtype=np.float32))
    (job / "r1-abc").rename(job / "gone")
    (job / "r1-abc").symlink_to("../trusted/round1")
    args = ([{"file": "s0_out0.npy", "dtype": "float32"}], [{"file": "s0_out0.npy", "dtype": "float32"}],
            1e-4, 1e-4, VerifyConfig())
    assert "fail" in compare_files(held, ref, *args, label="timed call 1")
    assert "fail" in compare_files(job / "r1-abc", ref, *args, label="a path")  # a path is not walked through a link
    same = create_held(tmp_path / "stage", tmp_path / "trusted", "x")
    same.fd, fd = os.open(ref, os.O_RDONLY), same.fd
    os.close(fd)
    assert "reference's own" in compare_files(same, ref, *args, label="t").get("fail", "")
    held.close()
    same.close()


def test_typed_reads_refuse_fifos_sockets_links_and_big_files(tmp_path):
    from verifier.sandbox.job_dir import open_regular, read_bytes

    d = tmp_path / "d"
    d.mkdir()
    os.mkfifo(d / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock"))
    (d / "link").symlink_to(d / "big")
    (d / "big").write_bytes(b"x" * 100)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name, why in [("fifo", "FIFO"), ("sock", "socket"), ("link", "link"), ("../d", "bad file name")]:
            with pytest.raises(ValueError, match=why):
                open_regular(fd, name)
        with pytest.raises(ValueError, match="more than"):
            read_bytes(fd, "big", 10)
        assert read_bytes(fd, "big", 100) == b"x" * 100
    finally:
        os.close(fd)
        sock.close()
