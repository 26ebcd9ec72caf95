"""The profiling run behind the optional Nsight Compute summary (`verifier.profile.ncu_summary` parses what it writes):
one more forward of an already verified candidate under `ncu --csv`, in the same sandbox as its
verification, whose rows go into the profile gate's detail or whose failure becomes a note. Apart from
`verifier.profile.ncu_summary` because it starts a sandboxed process (`verifier.workers.pools`), which the parser and the
summary lines (read by `verifier.result`) have no need of.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import cast

from verifier.backends import Backend
from verifier.config import VerifyConfig
from verifier.result import GateResult, VerificationResult
from verifier.sandbox.supervisor import LiveJob
from verifier.workers.pools import _clean_env, _limits, _sandbox_spec, _trusted_env


def _attach_ncu(profile: GateResult, result: VerificationResult, be: Backend, config: VerifyConfig, work: Path) -> None:
    """Per-kernel ncu rows into the profile gate's detail (`ncu`), or a note saying why there are none.

    One forward on the profile inputs (`profile_once`), under the same isolation as the candidate's run,
    with Nsight Compute's toolkit and installation visible read-only (`ncu_install_dirs`)."""
    from verifier.profile.ncu_summary import ncu_argv, ncu_install_dirs, ncu_path, parse_ncu_csv

    ncu = ncu_path()
    if be.device != "cuda":
        result.notes.append("ncu summary skipped: it needs a GPU backend on a GPU")
        return
    if ncu is None:
        result.notes.append("ncu summary skipped: ncu (Nsight Compute) is not on PATH")
        return
    job_dir = work / "ncu"  # the run's control files; the harness reads the job from `work`
    job_dir.mkdir()
    job = json.loads((work / "job.json").read_text())
    (work / "job.json").write_text(json.dumps({**job, "profile_once": True}))
    log = job_dir / "ncu.csv"
    argv = ncu_argv(ncu, log, [sys.executable, "-m", "verifier.workers.harness", str(work)])
    spec = None
    if config.isolate:
        spec = _sandbox_spec(work, config, be)
        # `work` is prepared on the host (the job's files copied in) and bound as it is: the one profiled
        # forward runs without the job tmpfs's cap (`job_mount`), bounded per file as before
        spec.job_bytes = 0
        spec.readonly.extend(ncu_install_dirs(ncu))
    env = _clean_env(be.child_env()) if spec is not None else {**_trusted_env(), **be.child_env()}
    job = LiveJob(argv, job_dir, _limits(config, config.run_timeout_s, be), env, spec=spec)
    job.send({"cmd": "go"})
    mark = job.expect({"report"}, config.run_timeout_s) or {}
    outcome = job.finish(timeout=5)
    text = "\n".join(_read_job_text(d, name) for d, name in ((job_dir, log.name), (work, f"{job_dir.name}.stderr")))
    rows = [k.to_dict() for k in parse_ncu_csv(text)]
    profile.detail["ncu_seconds"] = outcome.seconds
    if rows:
        profile.detail["ncu"] = rows
        return
    report = cast(dict, mark.get("report")) if isinstance(mark.get("report"), dict) else {}
    error = next((ln.strip() for ln in text.splitlines() if "==ERROR==" in ln), "")
    if not error and report.get("error"):
        error = f"{report.get('failed_phase', '?')}: {report.get('error_type')}: {report.get('error')}"
    if not error:
        error = " | ".join(ln.strip() for ln in text.splitlines()[-3:] if ln.strip())
    result.notes.append(f"ncu summary skipped: the profiling run {outcome.describe()} and reported no kernels"
                        + (f" ({error[:300]})" if error else ""))


def _read_job_text(directory: Path, name: str, max_bytes: int = 16 * 1024 * 1024) -> str:
    """A text file the sandbox could have replaced (Nsight's CSV, the stderr tail), read as
    `jobfiles.open_regular` allows: a link, FIFO or socket in its place reads as nothing, never blocks."""
    from verifier.sandbox.job_dir import read_bytes

    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        return read_bytes(fd, name, max_bytes).decode(errors="replace")
    except (OSError, ValueError):
        return ""
    finally:
        os.close(fd)
