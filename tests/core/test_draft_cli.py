"""`evokernel draft`, `sessions`, `replay` and `resume` from the command line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from evokernel_tui.cli import cli
from tests.fakes.verdicts import fake_verify, reply, write_replies

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path, monkeypatch):
    """An isolated cwd and config, and the verifier double in place of the real one."""
    import core.session.models

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("EVOKERNEL_MODEL", raising=False)
    monkeypatch.setenv("EVOKERNEL_SESSIONS", str(tmp_path / "sessions"))
    monkeypatch.setattr(core.session.models, "default_verify", fake_verify)
    return tmp_path


def invoke(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_draft_json_finds_and_refines(env):
    replies = write_replies(env / "r.json", [reply("incorrect"), reply("feasible", 0.8), reply("feasible", 0.4)])
    res = invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--no-memory", "--steps", "3",
                 "--refine", "1", "--json", "--out", str(env / "k.py"))
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["feasible"] and summary["best"]["version"] == 3 and summary["best_speedup"] == pytest.approx(2.5)
    assert summary["steps"] == {"draft": 2, "refine": 1} and summary["kernel_file"] == str(env / "k.py")
    assert "feasible 0.4" in (env / "k.py").read_text()
    assert [g["status"] for g in summary["gates"]] == ["pass"] * 5
    assert (Path(summary["path"]) / "events.jsonl").exists()


def test_draft_without_feasible_kernel_exits_1(env):
    replies = write_replies(env / "r.json", [reply("compile_fail"), "no code at all"])
    res = invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--no-memory", "--steps", "2", "--json")
    assert res.exit_code == 1
    summary = json.loads(res.stdout)
    assert not summary["feasible"] and summary["kernel_file"] is None
    assert summary["done_reason"] == "draft budget spent without a feasible kernel"
    assert not (env / "softmax_rows_cpu.py").exists()


def test_manual_mode_says_how_to_configure(env):
    res = invoke("draft", "softmax_rows", "--no-memory")
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "No model configured" in lines[0] and "EVOKERNEL_MODEL" in lines[0]


def test_bad_task_is_one_clear_line(env):
    res = invoke("draft", "no_such_task", "--model", "openai/x", "--no-memory")
    assert res.exit_code == 1 and "unknown task 'no_such_task'" in res.stderr and "Traceback" not in res.output


def test_sessions_replay_and_resume(env):
    replies = write_replies(env / "r.json", [reply("compile_fail"), reply("feasible", 0.5), reply("feasible", 0.25)])
    first = invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--no-memory", "--steps", "1", "--json")
    assert first.exit_code == 1
    sid = json.loads(first.stdout)["id"]
    listed = json.loads(invoke("sessions", "--json").stdout)
    assert [r["id"] for r in listed] == [sid] and listed[0]["steps"] == {"draft": 1, "refine": 0}
    table = invoke("sessions")
    assert sid[:15] in table.stdout and "softmax_rows" in table.stdout

    resumed = invoke("resume", sid[:20], "--add-draft", "1", "--add-refine", "1", "--no-memory", "--json")
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads(resumed.stdout)
    assert summary["steps"] == {"draft": 2, "refine": 1} and summary["best"]["latency_ms"] == 0.25

    replayed = invoke("replay", sid, "--json")
    lines = [json.loads(x) for x in replayed.stdout.splitlines()]
    recorded = [json.loads(x) for x in (Path(summary["path"]) / "events.jsonl").read_text().splitlines()]
    assert lines[:-1] == recorded and lines[-1]["summary"]["best_speedup"] == pytest.approx(4.0)

    again = invoke("replay", sid, "--reverify", "--json")
    rows = json.loads(again.stdout.splitlines()[-1])["reverify"]
    assert [r["outcome"] for r in rows] == ["compile_fail", "feasible", "feasible"] and again.exit_code == 0


def test_replay_unknown_session(env):
    res = invoke("replay", "nope")
    assert res.exit_code == 1 and "no session 'nope'" in res.stderr


@pytest.mark.parametrize("command", [["sessions"], ["replay", "x"], ["resume", "x"], ["draft", "relu"],
                                     ["tui", "relu"], ["tasks"]])
def test_corrupt_config_is_one_line_everywhere(env, monkeypatch, command):
    bad = env / "config.toml"
    bad.write_text("model = \n")
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(bad))
    res = invoke(*command)
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "not valid TOML" in lines[0], res.output
    assert "fix it, or set EVOKERNEL_CONFIG" in lines[0] and "Traceback" not in res.output
    assert "No model configured" not in res.output


def test_config_value_of_the_wrong_type_is_named(env, monkeypatch):
    bad = env / "config.toml"
    bad.write_text("model = 3\n")
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(bad))
    res = invoke("draft", "relu")
    assert res.exit_code == 1 and "`model` must be a string" in res.stderr


def test_help_works_with_a_corrupt_config(env, monkeypatch):
    bad = env / "config.toml"
    bad.write_text("[[[")
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(bad))
    assert invoke("draft", "--help").exit_code == 0


def test_missing_api_key_stops_before_a_session_is_made(env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("EVOKERNEL_API_KEY", raising=False)
    for command in (["draft", "relu", "--model", "openai/gpt-4o", "--no-memory"], ["tui", "relu", "--model", "openai/gpt-4o"]):
        res = invoke(*command)
        assert res.exit_code == 1, res.output
        assert "no API key; set OPENAI_API_KEY" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (env / "sessions").exists() or not any((env / "sessions").iterdir())


def test_tui_checks_task_and_memory_before_the_app_starts(env, monkeypatch):
    import evokernel_tui.app

    def no_app(self, *a, **k):
        raise AssertionError("the full-screen app started")

    monkeypatch.setattr(evokernel_tui.app.EvoKernelApp, "run", no_app)
    res = invoke("tui", "nosuchtask")
    assert res.exit_code == 1 and "unknown task 'nosuchtask'" in res.stderr
    bank = env / "bank.json"
    bank.write_text('{"broken')
    res = invoke("tui", "relu", "--memory", str(bank))
    assert res.exit_code == 1 and "cannot open the memory bank" in res.stderr and "--no-memory" in res.stderr


def test_default_kernel_file_is_not_overwritten(env):
    (env / "softmax_rows_cpu.py").write_text("mine\n")
    replies = write_replies(env / "r.json", [reply("feasible", 0.5)])
    res = invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--no-memory", "--steps", "1")
    assert res.exit_code == 0, res.output
    assert (env / "softmax_rows_cpu.py").read_text() == "mine\n"
    written = [p for p in env.glob("softmax_rows_cpu_*.py")]
    assert len(written) == 1 and "feasible 0.5" in written[0].read_text()
    assert "already exists and was left as it is" in res.stderr


@pytest.mark.slow
def test_draft_json_end_to_end_with_real_verifier(tmp_path):
    """The real CPU verifier builds the scripted C++ kernel (about 20 s)."""
    candidate = REPO / "tests" / "candidates" / "cpu" / "relu.py"
    if not candidate.exists():
        pytest.skip("the verifier's known-good CPU relu candidate is not in this checkout")
    good = candidate.read_text()
    replies = write_replies(tmp_path / "r.json", ["no code here", f"```python\n{good}```"])
    proc = subprocess.run(
        [sys.executable, "-m", "evokernel_tui.cli", "draft", "relu", "--model", f"scripted:{replies}", "--no-memory",
         "--steps", "2", "--json", "--sessions-dir", str(tmp_path / "s"), "--out", str(tmp_path / "k.py")],
        capture_output=True, text=True, cwd=REPO, timeout=300,
        env={**os.environ, "EVOKERNEL_CONFIG": str(tmp_path / "none.toml")},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["feasible"] and summary["steps"]["draft"] == 2
    assert [g["name"] for g in summary["gates"]][:3] == ["anti_hacking", "compile", "correctness"]
    assert (tmp_path / "k.py").read_text() == good


def test_resume_with_a_model_missing_its_key_is_one_line(env, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("EVOKERNEL_API_KEY", raising=False)
    replies = write_replies(env / "r.json", [reply("compile_fail")])
    sid = json.loads(invoke("draft", "softmax_rows", "--model", f"scripted:{replies}", "--no-memory", "--steps", "1",
                            "--json").stdout)["id"]
    res = invoke("resume", sid, "--model", "openai/gpt-4o", "--no-memory", "--add-draft", "1")
    assert res.exit_code == 1 and "no API key; set OPENAI_API_KEY" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


NO_GPU = "no GPU: torch is a CPU-only build; run on a machine with an NVIDIA GPU, or use --backend cpu"


@pytest.fixture
def no_gpu(monkeypatch):
    """The cuda backend as on a machine without a GPU (the real check says so here; patched for GPU hosts)."""
    import verifier.backends.cuda

    monkeypatch.setattr(verifier.backends.cuda.CudaBackend, "availability", lambda self: NO_GPU)


def _no_app(monkeypatch):
    import evokernel_tui.app

    def no_app(self, *a, **k):
        raise AssertionError("the full-screen app started")

    monkeypatch.setattr(evokernel_tui.app.EvoKernelApp, "run", no_app)


def test_cuda_without_a_gpu_stops_before_any_model_call_or_folder(env, monkeypatch, no_gpu):
    """Issue 34: `draft --backend cuda` made four model calls on a CPU machine before failing."""
    from tests.core.fake_openai_server import FakeOpenAI

    _no_app(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as srv:
        for command in (["draft", "relu", "--steps", "4"], ["tui", "relu"], ["bench", "--tasks", "relu", "--out", "b"]):
            res = invoke(*command, "--backend", "cuda", "--model", "openai/x", "--api-base", srv.api_base, "--no-memory")
            assert res.exit_code == 1, (command, res.output)
            assert res.stderr.strip().splitlines() == [f"Error: {NO_GPU}"], command
        assert srv.requests == []
    assert not (env / "sessions").exists() and not (env / "b").exists()


@pytest.mark.alone
def test_unreachable_api_base_is_one_line_before_a_session_folder(env, monkeypatch):
    """Issue 34: an unreachable --api-base cost 17 s and left an empty session folder."""
    import socket
    import time

    _no_app(monkeypatch)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    for command in (["draft", "relu", "--no-memory"], ["tui", "relu", "--no-memory"],
                    ["bench", "--tasks", "relu", "--out", "b", "--no-memory"]):
        started = time.monotonic()
        res = invoke(*command, "--model", "openai/x", "--api-base", base)
        assert time.monotonic() - started < 10
        assert res.exit_code == 1, (command, res.output)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and f"cannot reach the model server at {base}" in lines[0], command
    assert not (env / "sessions").exists() and not (env / "b").exists()


def test_a_reachable_api_base_passes_the_check():
    from core.config import endpoint_problem
    from tests.core.fake_openai_server import FakeOpenAI

    with FakeOpenAI() as srv:
        assert endpoint_problem(srv.api_base) is None
        assert srv.requests == []  # one GET of the model list, no completion
    assert endpoint_problem(None) is None
    assert "names no host" in endpoint_problem("http:///v1")


def test_a_port_that_does_not_speak_http_is_refused_in_one_line():
    """A wrong `--api-base` port where something else listens (a database, an SSH daemon) passed the bare
    connection check and cost the run its model calls' retries; it must fail the check, in seconds."""
    import socket
    import threading
    import time

    from core.config import endpoint_problem

    for greeting in (b"SSH-2.0-OpenSSH_9.6\r\n", b""):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(4)
        port = srv.getsockname()[1]

        def answer(sock=srv, hello=greeting):
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = sock.accept()
                    conn.recv(4096)
                    if hello:
                        conn.sendall(hello)
                    conn.close()

        threading.Thread(target=answer, daemon=True).start()
        started = time.monotonic()
        problem = endpoint_problem(f"http://127.0.0.1:{port}/v1", timeout_s=2.0)
        srv.close()
        assert problem and "did not answer as an HTTP model server" in problem, (greeting, problem)
        assert "\n" not in problem and time.monotonic() - started < 5


def _saved_session(env, backend: str, api_base: str) -> str:
    """A session created (no model call yet) with a served model at `api_base`, as `draft` would leave it."""
    from core.llm import ModelConfig
    from core.session import Budgets, Session
    from core.tasks import load_task

    s = Session.create(load_task("relu"), backend=backend, model=ModelConfig("openai/x", api_base=api_base),
                       memory=None, root=env / "sessions", budgets=Budgets(draft_steps=2, refine_steps=0))
    s.close()
    return s.id


def test_resume_checks_the_sessions_backend_before_any_model_call(env, monkeypatch, no_gpu):
    """Issue 34: every check before a model call, for `resume` too: the session's own backend (cuda on a
    machine without a GPU) is one line, and its model server hears nothing."""
    from tests.core.fake_openai_server import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAI() as srv:
        sid = _saved_session(env, "cuda", srv.api_base)
        res = invoke("resume", sid, "--no-memory")
        assert res.exit_code == 1, res.output
        assert res.stderr.strip().splitlines()[-1] == f"Error: {NO_GPU}"
        assert srv.requests == []


@pytest.mark.parametrize("command", ["resume", "tui"])
def test_resume_checks_the_recorded_server_before_any_model_call(env, monkeypatch, command):
    """The server a session was created with (`--api-base`), unreachable now: one line in seconds from
    `resume` and `tui --session`, before the screen or a model call."""
    import socket
    import time

    _no_app(monkeypatch)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    sid = _saved_session(env, "cpu", base)
    started = time.monotonic()
    res = invoke(*(["resume", sid] if command == "resume" else ["tui", "--session", sid]), "--no-memory")
    assert time.monotonic() - started < 10
    assert res.exit_code == 1, res.output
    assert f"cannot reach the model server at {base}" in res.stderr.strip().splitlines()[-1]


def test_a_full_build_disk_is_one_line_before_any_model_call_or_folder(env, monkeypatch):
    """Issue 34: disk for the build root is checked with the backend, before a model call, a session folder
    or a verification (a full disk was found by the compiler half-way through a step)."""
    import shutil
    from collections import namedtuple

    from tests.core.fake_openai_server import FakeOpenAI

    real = shutil.disk_usage
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 * 2**30, 10 * 2**30 - 100 * 2**20, 100 * 2**20))
    monkeypatch.setenv("EVOKERNEL_BUILD_DIR", str(env / "builds"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    _no_app(monkeypatch)
    (env / "k.py").write_text("x = 1\n")
    with FakeOpenAI() as srv:
        for command in (["draft", "relu"], ["tui", "relu"], ["bench", "--tasks", "relu", "--out", "b"],
                        ["verify", "relu", "k.py"]):
            model = [] if command[0] == "verify" else ["--model", "openai/x", "--api-base", srv.api_base]
            res = invoke(*command, *model, *([] if command[0] == "verify" else ["--no-memory"]))
            assert res.exit_code == 1, (command, res.output)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and "only 100 MB free on the disk holding the build folder" in lines[0], command
            assert "EVOKERNEL_BUILD_DIR" in lines[0]
        assert srv.requests == []
    assert not (env / "sessions").exists() and not (env / "b").exists()
    monkeypatch.setattr(shutil, "disk_usage", real)
    from core.verifying import build_root_problem

    assert build_root_problem(env / "builds" / "not" / "made" / "yet") is None  # the nearest existing folder
