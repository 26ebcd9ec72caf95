"""Issue 34: `scripts/setup.sh` printed nothing but setuptools warnings for 7 minutes on a busy machine.
It now says each step with its time, keeps pip's own output in .venv/setup.log (its tail shown when a
step fails) and ends with a command that runs. Run here on a copy with a stand-in Python (no install)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOISE = "WARNING: Location 'file:///opt/pypi/simple/plotext/' is ignored"

FAKE_PYTHON = f"""#!/bin/sh
echo "{NOISE}"
echo "  BuildBackendWarning: Editable installation." >&2
case "$*" in *torch==*) [ -n "$FAIL_TORCH" ] && {{ echo "ERROR: No matching distribution for torch" >&2; exit 3; }} ;; esac
exit 0
"""


def _project(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "setup.sh", proj / "scripts" / "setup.sh")
    bin_dir = proj / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("evokernel", "#!/bin/sh\necho 'evokernel, version 0.1.0'\n")):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    return proj


def _setup(proj: Path, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "EVOKERNEL_SKIP_PREWARM"}
    return subprocess.run(["bash", "scripts/setup.sh"], cwd=proj, env={**base, **env}, capture_output=True,
                          text=True, timeout=60)


def test_setup_says_its_steps_and_keeps_third_party_noise_in_the_log(tmp_path):
    proj = _project(tmp_path)
    res = _setup(proj)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    steps = [line for line in lines if line.startswith("[")]
    assert [s.split("]")[0] + "]" for s in steps] == [f"[{i}/5]" for i in range(1, 6)], lines
    assert all(s.endswith("s)") and "done (" in s for s in steps), steps
    assert any("installing torch" in s for s in steps)
    assert NOISE not in res.stdout + res.stderr and "BuildBackendWarning" not in res.stdout + res.stderr
    log = (proj / ".venv" / "setup.log").read_text()
    assert NOISE in log and "BuildBackendWarning" in log
    assert "Run it with: .venv/bin/evokernel tui relu" in res.stdout and "source .venv/bin/activate" in res.stdout


def test_a_failed_step_shows_the_end_of_its_log_and_stops(tmp_path):
    proj = _project(tmp_path)
    res = _setup(proj, FAIL_TORCH="1", EVOKERNEL_SKIP_PREWARM="1")
    assert res.returncode == 3
    assert "[3/4] installing torch" in res.stdout and "failed after" in res.stdout
    assert "ERROR: No matching distribution for torch" in res.stdout  # the log's tail, where to look
    assert "installing EvoKernel TUI" not in res.stdout and "Run it with" not in res.stdout
