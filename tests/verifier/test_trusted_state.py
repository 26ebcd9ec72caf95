"""The trusted side's own state: signed verdicts, requests for shared build artefacts, scratch."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from verifier.build.shared_artefacts import safe_cflags, safe_type
from verifier.cache.signed_verdicts import load_verdict, store_verdict


def test_signed_verdict_round_trips(tmp_path):
    store_verdict(tmp_path, "k1", {"backend": "cpu", "latency_ms": 1.5})
    verdict, stored_at = load_verdict(tmp_path, "k1")
    assert verdict == {"backend": "cpu", "latency_ms": 1.5}
    assert abs(stored_at - time.time()) < 60
    assert (tmp_path / "trusted" / "verdict.key").stat().st_mode & 0o777 == 0o600


def test_edited_verdict_is_rejected_and_removed(tmp_path):
    store_verdict(tmp_path, "k1", {"latency_ms": 1.5})
    path = tmp_path / "verdicts" / "k1.json"
    wrapper = json.loads(path.read_text())
    wrapper["payload"] = wrapper["payload"].replace("1.5", "0.0001")
    path.write_text(json.dumps(wrapper))
    assert load_verdict(tmp_path, "k1") is None
    assert not path.exists()


def test_verdict_forged_without_the_key_is_rejected(tmp_path):
    store_verdict(tmp_path, "real", {"x": 1})
    import hashlib
    import hmac

    payload = json.dumps({"verdict": {"x": 2}, "stored_at": time.time()})
    guess = hmac.new(b"\0" * 32, payload.encode(), hashlib.sha256).hexdigest()
    (tmp_path / "verdicts" / "k2.json").write_text(json.dumps({"payload": payload, "hmac": guess}))
    assert load_verdict(tmp_path, "k2") is None


def test_verdict_from_the_future_is_ignored(tmp_path, monkeypatch):
    store_verdict(tmp_path, "k1", {"x": 1})
    monkeypatch.setattr(time, "time", lambda: 0.0)
    assert load_verdict(tmp_path, "k1") is None


@pytest.mark.parametrize("flags, ok", [
    (["-O3", "-fopenmp"], True),
    (["-O2", "-march=native", "-DBLOCK=64", "-ffast-math"], True),
    (["-include", "/etc/passwd"], False),
    (["-fplugin=/tmp/evil.so"], False),
    (["-B/tmp/evil"], False),
    (["-O3", "-I/tmp"], False),
    (["-specs=/tmp/x"], False),
    ("-O3", False),
])
def test_only_harmless_flags_reach_a_trusted_build(flags, ok):
    assert safe_cflags(flags) is ok


@pytest.mark.parametrize("text, ok", [
    ("torch::Tensor", True),
    ("const torch::Tensor&", True),
    ("std::vector<torch::Tensor>", True),
    ("int64_t", True),
    ("int); system(\"rm -rf /\"); (int", False),
    ("torch::Tensor /* */", False),
    ("MyType", False),
])
def test_only_known_types_reach_generated_bindings(text, ok):
    assert safe_type(text) is ok


def test_refused_request_builds_nothing(tmp_path):
    from verifier.build.shared_artefacts import build_shared

    assert build_shared(tmp_path, "pch", {"kind": "evk_shim", "cflags": ["-include", "/etc/passwd"]}) is False
    assert build_shared(tmp_path, "bind", {"signatures": [["int); system(\"x\"); (int", []]]}) is False
    assert build_shared(tmp_path, "other", {}) is False
    assert not (tmp_path / "pch").exists() and not (tmp_path / "bind").exists()


def test_scratch_is_private_and_cleaned_of_dead_runs(tmp_path, monkeypatch):
    from verifier.sandbox.isolation import clean_stale_runs, private_scratch

    scratch = private_scratch()
    assert scratch.stat().st_mode & 0o077 == 0
    assert scratch.stat().st_uid == os.getuid()
    dead = scratch / "runs" / "run-deadbeef"
    dead.mkdir(parents=True, exist_ok=True)
    (dead / ".owner").write_text("999999999")
    alive = scratch / "runs" / "run-alive"
    alive.mkdir(exist_ok=True)
    (alive / ".owner").write_text(str(os.getpid()))
    clean_stale_runs(scratch)
    assert not dead.exists() and alive.exists()
    alive.joinpath(".owner").unlink()
    alive.rmdir()


def test_sandbox_view_hides_the_persons_state(tmp_path):
    """The bubblewrap command line: system dirs read-only, state paths covered, the job writable."""
    from verifier.sandbox.isolation import SandboxSpec, bwrap_argv

    job = tmp_path / "job"
    job.mkdir()
    project = Path(__file__).resolve().parents[2]
    argv = bwrap_argv(SandboxSpec(writable=[job], hidden=[project / "sessions"]), ["true"])
    assert "--unshare-all" in argv and "--die-with-parent" in argv
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--bind", str(job.resolve())) in pairs
    assert ("--tmpfs", str((project / "sessions").resolve())) in pairs
    assert not any(a == "--bind" and b in ("/", str(Path.home())) for a, b in pairs)


def test_audited_mappings_are_those_the_candidate_could_write():
    """Executable mappings from the job or a private tmpfs are audited; a read-only tree bound over
    /tmp (a project or virtual environment installed there) is not the candidate's."""
    from verifier.api import writable_mappings_in

    maps = "\n".join(f"7f00-7f01 {perm} 0 00:00 1 {path}" for perm, path in [
        ("r-xp", "/tmp/ci/.venv/lib/python3.11/site-packages/torch/lib/libtorch_cpu.so"),
        ("r-xp", "/tmp/evil.so"),
        ("r-xp", "/dev/shm/x/job/build/ext/k/relu.so"),
        ("r-xp", "/dev/shm/x/job/build/ext/k/gone.so (deleted)"),
        ("rw-p", "/tmp/data.bin"),
        ("r-xp", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
        ("r-xp", "/tmp/ci/.venv/../job-copy.so"),
    ])
    got = writable_mappings_in(maps, Path("/dev/shm/x/job"), [Path("/tmp/ci")])
    assert got == ["/tmp/evil.so", "/dev/shm/x/job/build/ext/k/relu.so", "/dev/shm/x/job/build/ext/k/gone.so"]


def _trusted_inputs(tmp_path: Path) -> Path:
    src = tmp_path / "trusted" / "trial0"
    src.mkdir(parents=True)
    (src / "in.json").write_text("{}")
    (src / "in0.npy").write_bytes(b"data")
    return src


@pytest.mark.parametrize("move", [True, False])
def test_hand_over_into_a_directory_swapped_for_a_link_writes_nothing_outside(tmp_path, move):
    """The candidate runs while the trusted side hands it inputs: a hand-over directory replaced by a
    link to a place outside the job must not redirect the trusted side's writes there."""
    from verifier.api import JobTampered
    from verifier.run.handover import hand_over

    src = _trusted_inputs(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    job = tmp_path / "job"
    job.mkdir()
    dst = job / "t0-abc"
    dst.mkdir()
    dst.rename(job / "moved-away")
    dst.symlink_to(outside)
    with pytest.raises(JobTampered):
        hand_over(src, dst, "in", move=move)
    assert list(outside.iterdir()) == []


def test_hand_over_refuses_a_planted_link_where_an_input_goes(tmp_path):
    from verifier.api import JobTampered
    from verifier.run.handover import hand_over

    src = _trusted_inputs(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    dst = tmp_path / "job" / "t0-abc"
    dst.mkdir(parents=True)
    (dst / "in0.npy").symlink_to(victim)
    with pytest.raises(JobTampered):
        hand_over(src, dst, "in", move=False)
    assert victim.read_text() == "keep me"
    hand_over(src, dst, "in", move=True)  # a rename replaces the link itself
    assert victim.read_text() == "keep me" and not (dst / "in0.npy").is_symlink()
