"""The optional Nsight Compute summary: ncu's CSV parsed into per-kernel rows, the rows reaching the profile
gate and the refine feedback, and a clear note (never an error) when ncu cannot run."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from verifier import api
from verifier.backends.base import Backend
from verifier.config import VerifyConfig
from verifier.profile.ncu_summary import ncu_argv, parse_ncu_csv, summary_lines
from verifier.result import GateResult, VerificationResult

# As `ncu --metrics ... --csv` prints it: its own ==PROF== lines, the program's output, then one row per
# kernel launch and metric, values with thousands separators and times in the unit ncu chose.
SAMPLE = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "relu_vec4" - 0: 0%....50%....100% - 1 pass
==PROF== Profiling "relu_tail" - 1: 0%....50%....100% - 1 pass
candidate says hello
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","relu_vec4(const float4 *, float4 *, long)","1","7","(256, 1, 1)","(1,056, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","87.41"
"0","4242","python3.12","127.0.0.1","relu_vec4(const float4 *, float4 *, long)","1","7","(256, 1, 1)","(1,056, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","1,024.50"
"0","4242","python3.12","127.0.0.1","relu_vec4(const float4 *, float4 *, long)","1","7","(256, 1, 1)","(1,056, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","76.02"
"1","4242","python3.12","127.0.0.1","relu_tail(const float *, float *, long, long)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"
"1","4242","python3.12","127.0.0.1","relu_tail(const float *, float *, long, long)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,336"
"1","4242","python3.12","127.0.0.1","relu_tail(const float *, float *, long, long)","1","7","(256, 1, 1)","(1, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","12.5"
'''


def test_csv_becomes_one_row_per_kernel_launch_in_order():
    rows = [k.to_dict() for k in parse_ncu_csv(SAMPLE)]
    assert [r["kernel"] for r in rows] == ["relu_vec4(const float4 *, float4 *, long)",
                                           "relu_tail(const float *, float *, long, long)"]
    assert rows[0] == {"kernel": rows[0]["kernel"], "occupancy_pct": 76.02, "dram_pct": 87.41, "time_us": 1024.5}
    assert rows[1]["time_us"] == 2.336 and rows[1]["occupancy_pct"] == 12.5
    assert rows[1]["dram_pct"] is None


def test_same_kernel_launched_twice_gives_two_rows_and_milliseconds_convert():
    header = SAMPLE.splitlines()[5]
    row = ('"{id}","1","p","h","k(int)","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s",'
           '"gpu__time_duration.sum","msecond","{v}"')
    text = "\n".join([header, row.format(id=0, v="1.5"), row.format(id=1, v="0.25")])
    assert [k.time_us for k in parse_ncu_csv(text)] == [1500.0, 250.0]


def test_no_csv_header_means_no_rows():
    assert parse_ncu_csv("==ERROR== ERR_NVGPUCTRPERM - no permission to access GPU performance counters\n") == []
    assert parse_ncu_csv("") == []


def test_summary_lists_slowest_first_and_shortens_long_names():
    rows = [k.to_dict() for k in parse_ncu_csv(SAMPLE)]
    rows.append({"kernel": "void at::native::" + "x" * 200, "occupancy_pct": None, "dram_pct": 5.0, "time_us": 3.0})
    lines = summary_lines(rows)
    assert lines[0].startswith("  relu_vec4") and "1024.5 us" in lines[0] and "occupancy 76%" in lines[0]
    assert "DRAM throughput 87% of peak" in lines[0]
    assert lines[1].startswith("  void at::native::") and "..." in lines[1] and "occupancy ?" in lines[1]
    assert lines[2].startswith("  relu_tail") and "DRAM throughput ?" in lines[2]


def _feasible(profile_detail: dict) -> VerificationResult:
    gates = [GateResult(n, "pass") for n in ("anti_hacking", "compile", "correctness", "latency")]
    gates.append(GateResult("profile", "pass", detail=profile_detail))
    return VerificationResult(backend="cuda", gates=gates, latency_ms=0.03, reference_ms=0.04,
                              profile=[{"name": "relu_vec4", "self_ms": 0.02, "calls": 1}])


def test_feedback_shows_ncu_rows_under_the_profile_and_survives_a_round_trip():
    res = _feasible({"ncu": [k.to_dict() for k in parse_ncu_csv(SAMPLE)]})
    text = VerificationResult.from_dict(json.loads(json.dumps(res.to_dict()))).feedback()
    lines = text.splitlines()
    at = lines.index("Nsight Compute, one forward (slowest kernels first):")
    assert lines.index("Top ops by self time:") < at
    assert "relu_vec4" in lines[at + 1] and "relu_tail" in lines[at + 2]
    assert "Nsight" not in _feasible({}).feedback()


def test_ncu_argv_asks_for_the_three_metrics_as_csv_into_the_log():
    argv = ncu_argv("/opt/ncu", Path("/tmp/x/ncu.csv"), ["python", "-m", "verifier.workers.harness", "/tmp/x"])
    assert argv[0] == "/opt/ncu" and argv[-4:] == ["python", "-m", "verifier.workers.harness", "/tmp/x"]
    metrics = argv[argv.index("--metrics") + 1].split(",")
    assert set(metrics) == {"sm__warps_active.avg.pct_of_peak_sustained_active",
                            "dram__throughput.avg.pct_of_peak_sustained_elapsed", "gpu__time_duration.sum"}
    assert "--csv" in argv and argv[argv.index("--log-file") + 1] == "/tmp/x/ncu.csv"


def _fake_ncu(bin_dir: Path, body: str) -> None:
    bin_dir.mkdir()
    path = bin_dir / "ncu"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _attach(tmp_path: Path, monkeypatch, device: str = "cuda") -> tuple[GateResult, VerificationResult]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "job.json").write_text(json.dumps({"mode": "candidate", "seeds": [1]}))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    prof = GateResult("profile", "pass")
    res = VerificationResult(backend="cuda", gates=[prof])
    # the plumbing only (the fake ncu lives in tmp_path, which a sandbox would not show)
    api._attach_ncu(prof, res, Backend(name="cuda", device=device), VerifyConfig(run_timeout_s=30, isolate=False), work)
    return prof, res


@pytest.mark.slow
def test_profile_once_job_runs_under_ncu_and_its_rows_reach_the_profile_gate(tmp_path, monkeypatch):
    (tmp_path / "sample.csv").write_text(SAMPLE)
    # The fake ncu checks that the job the harness will read (its last argument: the work directory) is a
    # profile-once job, then writes the sample CSV to --log-file.
    _fake_ncu(tmp_path / "bin", f'''for last; do :; done
while [ "$1" != "--log-file" ]; do shift; done
log="$2"
grep -q '"profile_once": true' "$last/job.json" || exit 7
cp {tmp_path / "sample.csv"} "$log"
''')
    prof, res = _attach(tmp_path, monkeypatch)
    assert [r["kernel"].split("(")[0] for r in prof.detail["ncu"]] == ["relu_vec4", "relu_tail"]
    assert prof.detail["ncu_seconds"] >= 0 and res.notes == []


@pytest.mark.slow
def test_ncu_failure_is_a_note_with_its_error_not_an_exception(tmp_path, monkeypatch):
    _fake_ncu(tmp_path / "bin", 'echo "==ERROR== ERR_NVGPUCTRPERM - no permission to access counters"; exit 1\n')
    prof, res = _attach(tmp_path, monkeypatch)
    assert "ncu" not in prof.detail
    assert len(res.notes) == 1 and res.notes[0].startswith("ncu summary skipped: the profiling run exited with code 1")
    assert "ERR_NVGPUCTRPERM" in res.notes[0]


def test_without_ncu_or_on_the_cpu_the_summary_is_skipped_with_a_note(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr("verifier.profile.ncu_summary.shutil.which", lambda name: None)
    prof, res = _attach(tmp_path, monkeypatch)
    assert res.notes == ["ncu summary skipped: ncu (Nsight Compute) is not on PATH"] and "ncu" not in prof.detail
    (tmp_path / "cpu").mkdir()
    prof, res = _attach(tmp_path / "cpu", monkeypatch, device="cpu")
    assert res.notes == ["ncu summary skipped: it needs a GPU backend on a GPU"]


def test_a_sandboxed_ncu_sees_its_toolkit_and_the_install_its_wrapper_links_to(tmp_path):
    """The H100 image's ncu is a wrapper in the CUDA toolkit whose Nsight Compute directory lies outside
    it (`nsight-compute directory is not found ...` inside the sandbox when only the toolkit was bound)."""
    from verifier.profile.ncu_summary import ncu_install_dirs

    toolkit, opt = tmp_path / "cuda-13.0", tmp_path / "opt" / "nvidia"
    (toolkit / "bin").mkdir(parents=True)
    (opt / "nsight-compute" / "2025.3.1").mkdir(parents=True)
    (toolkit / "bin" / "ncu").write_text("#!/bin/sh\n")
    (toolkit / "nsight-compute-2025.3.1").symlink_to(opt / "nsight-compute" / "2025.3.1")
    link = tmp_path / "cuda"
    link.symlink_to(toolkit)
    dirs = ncu_install_dirs(str(link / "bin" / "ncu"), opt=opt)
    assert dirs == [toolkit, opt], "the link's target is inside /opt/nvidia, which is bound once"
    assert ncu_install_dirs(str(link / "bin" / "ncu"), opt=tmp_path / "none") == [toolkit, opt / "nsight-compute" / "2025.3.1"]
    inside = tmp_path / "cuda-12"
    (inside / "bin").mkdir(parents=True)
    (inside / "nsight-compute-2024").mkdir()
    assert ncu_install_dirs(str(inside / "bin" / "ncu"), opt=tmp_path / "none") == [inside]
