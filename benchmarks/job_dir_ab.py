"""A/B: the job directory as its own tmpfs (`verifier/sandbox/job_mount.py`) against a bind of the host
directory (as before issue 37's cap), honest kernels interleaved in one process, so that a change in
honest verdicts from the cap would show beside the machine's own noise.

    python benchmarks/job_dir_ab.py softmax_rows,relu 2
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from core.tasks import load_task
    from verifier import VerifyConfig, verify
    from verifier.sandbox import job_mount
    from verifier.workers import pools

    real = job_mount.job_bytes
    build = tempfile.mkdtemp(prefix="evk-ab-")
    rows = []
    for name in sys.argv[1].split(","):
        task = load_task(name).source
        cand = (ROOT / "tests" / "candidates" / "cpu" / f"{name}.py").read_text()
        cfg = VerifyConfig(use_cache=False, build_root=build)
        verify(task, cand, "cpu", cfg)  # builds once
        for i in range(int(sys.argv[2])):
            for mode in ("tmpfs", "bind"):
                job_mount.job_bytes = real if mode == "tmpfs" else (lambda *a, **k: 0)
                pools._SPARES.close()  # no spare sandbox of the other mode
                t0 = time.monotonic()
                res = verify(task, cand, "cpu", cfg)
                lat = next((g for g in res.gates if g.name == "latency"), None)
                d = lat.detail if lat is not None else {}
                row = (name, mode, i, d.get("speedup"), d.get("lo"), d.get("hi"), d.get("noisy"),
                       round(time.monotonic() - t0, 1), os.getloadavg()[0])
                print(row, flush=True)
                rows.append(row)
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
