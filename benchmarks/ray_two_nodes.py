"""Issue 36, Ray beyond one node on one machine: `evokernel bench --executor ray --address ...` over a
head and a worker node (separate raylet processes, one CPU each, `ray.cluster_utils.Cluster`), then the
worker node killed mid-run.

What it shows, in one run:
1. work spreads over both nodes: while the bench runs, a second driver samples each node's free CPUs; a
   sample where both nodes' only CPU is taken means two verifications ran at once, one on each node;
2. a killed worker node loses no result: the node is removed without grace while its verification runs
   (the first sample where its CPU is taken, after the first verdict); Ray runs the job again on the head
   (`RayExecutor`'s `max_retries`), and every task ends with a verdict;
3. `bench` resumes: the same command again with the same `--out` finds every task recorded and runs none.

The model is a `scripted:` file replying to each built-in task with its honest CPU kernel
(`tests/candidates/cpu/`); the verification is the real one.

    python benchmarks/ray_two_nodes.py [--results DIR] [--tasks relu,softmax_rows,...]

Writes `ray_two_nodes_<date>_<tag>.md` and `.json` under --results.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CANDIDATES = ROOT / "tests" / "candidates" / "cpu"
DEFAULT_TASKS = "relu,softmax_rows,layernorm,sum_rows,gemm_bias_relu,matmul"


def per_node_cpus(ray) -> dict[str, float]:
    from ray._private import state

    return {node: float(res.get("CPU", 0.0)) for node, res in state.state.available_resources_per_node().items()}


def _watch(proc, args, t0: float, ray, cluster, worker, head_id: str, worker_id: str, out: Path, record: dict) -> int:
    """Sample each node's free CPU every 0.5 s while the bench runs; kill the worker node once both nodes
    were busy at once, a first verdict is in and the worker's CPU is taken; the bench's exit status."""
    killed_at, both_busy = None, 0
    try:
        while proc.poll() is None and time.monotonic() - t0 < args.timeout:
            free = per_node_cpus(ray)
            busy = {n: free.get(i, 1.0) < 0.5 for n, i in (("head", head_id), ("worker", worker_id))}
            record["samples"].append([round(time.monotonic() - t0, 1), busy["head"], busy["worker"]])
            both_busy += busy["head"] and busy["worker"]
            bench = out / "bench.json"
            verdicts = bench.exists() and json.loads(bench.read_text()).get("outcomes")
            if killed_at is None and busy["worker"] and both_busy >= 2 and verdicts:
                cluster.remove_node(worker, allow_graceful=False)  # the worker node dies mid-verification
                killed_at = round(time.monotonic() - t0, 1)
            time.sleep(0.5)
        code = proc.wait(timeout=max(1.0, args.timeout - (time.monotonic() - t0)))
    finally:
        if proc.poll() is None:
            proc.kill()
    record["_killed_at"], record["_both_busy"] = killed_at, both_busy
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--tasks", default=DEFAULT_TASKS)
    ap.add_argument("--tag", default="cpu")
    ap.add_argument("--timeout", type=float, default=1500.0)
    args = ap.parse_args(argv)

    import ray
    from ray.cluster_utils import Cluster

    from tests.fakes.kernel_model import scripted_replies

    tasks = [t for t in args.tasks.split(",") if t]
    work = Path(tempfile.mkdtemp(prefix="evk-ray2-"))
    script = work / "replies.json"
    script.write_text(json.dumps(scripted_replies({t: (CANDIDATES / f"{t}.py").read_text() for t in tasks})))
    out = work / "bench"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    head_id, worker_id = cluster.head_node.node_id, worker.node_id
    cmd = [sys.executable, "-m", "evokernel_tui.cli", "bench", "--tasks", ",".join(tasks), "--executor", "ray",
           "--address", cluster.address, "--workers", "2", "--draft-steps", "1", "--refine-steps", "0",
           "--fresh-memory", "--out", str(out), "--model", f"scripted:{script}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    record: dict = {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "tasks": tasks,
                    "command": " ".join(cmd), "nodes": {"head": head_id, "worker": worker_id}, "samples": [],
                    "load": os.getloadavg()}
    t0 = time.monotonic()
    with open(work / "bench1.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        code = _watch(proc, args, t0, ray, cluster, worker, head_id, worker_id, out, record)
        killed_at, both_busy = record.pop("_killed_at"), record.pop("_both_busy")
    first = json.loads((out / "bench.json").read_text()) if (out / "bench.json").exists() else {}
    outcomes = first.get("outcomes") or []
    record.update(first_run={"exit": code, "seconds": round(time.monotonic() - t0, 1), "killed_worker_at_s": killed_at,
                             "samples_both_busy": both_busy, "verdicts": len(outcomes),
                             "feasible": sum(1 for o in outcomes if o.get("feasible")),
                             "errors": [o.get("task") for o in outcomes if o.get("error")],
                             "log_tail": (work / "bench1.log").read_text()[-2500:]})
    t1 = time.monotonic()
    again = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.timeout)
    record["resume"] = {"exit": again.returncode, "seconds": round(time.monotonic() - t1, 1),
                        "skipped": again.stdout.count("recorded earlier, skipped"), "tail": again.stdout[-1500:]}
    ray.shutdown()
    cluster.shutdown()
    args.results.mkdir(parents=True, exist_ok=True)
    base = args.results / f"ray_two_nodes_{dt.date.today():%Y-%m-%d}_{args.tag}"
    base.with_suffix(".json").write_text(json.dumps(record, indent=1))
    r1, r2 = record["first_run"], record["resume"]
    lines = [f"# bench over a 2-node Ray cluster on one machine, the worker node killed mid-run ({record['date']})", "",
             f"Command (per run): `{record['command']}`", "",
             f"Machine load at start: {', '.join(f'{x:.1f}' for x in record['load'])}", "",
             f"- tasks: {len(tasks)}; first run exit {r1['exit']} in {r1['seconds']} s; verdicts {r1['verdicts']}, "
             f"feasible {r1['feasible']}, errors {r1['errors'] or 'none'}",
             f"- both nodes busy at once in {r1['samples_both_busy']} of {len(record['samples'])} samples (0.5 s apart)",
             f"- worker node killed at {r1['killed_worker_at_s']} s (while its CPU was taken)",
             f"- the same command again (resume): exit {r2['exit']} in {r2['seconds']} s, "
             f"{r2['skipped']} of {len(tasks)} tasks recorded earlier and skipped"]
    base.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    ok = (r1["exit"] == 0 and r1["verdicts"] == len(tasks) and not r1["errors"] and r1["killed_worker_at_s"] is not None
          and r2["exit"] == 0 and r2["skipped"] == len(tasks))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
