"""Where a kernel was measured, as data for the memory (`core.device`), and a session that records it in
its trajectories, Q-updates and prompts (issue 35)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from core.device import cpu_model, device_record
from core.events import read_events
from core.prompting import render_memories
from evokernel_tui.cli import cli
from memory import MemoryStore
from tests.fakes.verdicts import fake_verify, reply, write_replies


def test_cpu_model_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)  Gold 6338\n")
    assert cpu_model(info) == "Intel(R) Xeon(R) Gold 6338"
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50\n\nHardware\t: Neoverse-V2\n")
    assert cpu_model(arm) == "Neoverse-V2"


def test_device_record_gpu_and_cpu():
    gpu = device_record("cuda", "NVIDIA H100 80GB HBM3", gpu=("NVIDIA H100 80GB HBM3", "9.0"))
    assert gpu["class"] == "NVIDIA H100 80GB HBM3 (sm_90)" and gpu["capability"] == "9.0" and gpu["kind"] == "gpu"
    remote = device_record("cuda", "NVIDIA H200", gpu=("NVIDIA H100 80GB HBM3", "9.0"))
    assert remote["name"] == "NVIDIA H200"  # the verdict's device wins: it is where the kernel ran
    cpu = device_record("cpu", "cpu (x86_64, 16 threads)", cpu="AMD EPYC 7B13")
    assert cpu == {"backend": "cpu", "kind": "cpu", "name": "AMD EPYC 7B13", "capability": "",
                   "class": "cpu: AMD EPYC 7B13"}


class _Item:
    def __init__(self, title, learnt_on):
        self.title, self.text, self.learnt_on = title, "text", learnt_on


def test_prompt_marks_a_memory_learnt_on_another_device():
    text = render_memories([_Item("tile it", "NVIDIA H100 80GB HBM3 (sm_90)"), _Item("here", "cpu: X")],
                           here="cpu: X")
    assert "### tile it (learnt on NVIDIA H100 80GB HBM3 (sm_90), another device)" in text
    assert "### here\n" in text


def test_session_records_the_device_in_trajectories_and_q_updates(tmp_path, monkeypatch):
    import core.session.models

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("EVOKERNEL_MODEL", raising=False)
    monkeypatch.setenv("EVOKERNEL_SESSIONS", str(tmp_path / "sessions"))
    monkeypatch.setattr(core.session.models, "default_verify", fake_verify)
    replies = write_replies(tmp_path / "r.json", [reply("compile_fail"), reply("feasible", 0.5), reply("feasible", 0.25)])
    bank = tmp_path / "bank.json"
    res = CliRunner().invoke(cli, ["draft", "softmax_rows", "--model", f"scripted:{replies}", "--memory", str(bank),
                                   "--steps", "2", "--refine", "1", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    here = device_record("cpu")["class"]
    events = read_events(tmp_path / "sessions" / json.loads(res.stdout)["id"])
    updates = [e.data for e in events if e.kind == "q_update"]
    assert updates and all(u["device"] == here and u["backend"] == "cpu" for u in updates)
    assert all(c["device"] == here for u in updates for c in u["changes"])
    store = MemoryStore(bank, fsync=False)
    learnt = [i for i in store.items("trajectory")]
    assert learnt and all(i.data["device"]["class"] == here and i.data["device"]["backend"] == "cpu" for i in learnt)
    assert store.stats()["devices"][here]["learnt"] == len(learnt)
    store.close()
