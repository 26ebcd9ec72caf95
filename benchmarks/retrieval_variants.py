"""Measure a value-retrieval variant on the two learning benchmarks (issue 38).

`$EVK_OVR` (JSON) sets `RetrievalPolicy` fields for value mode only (similarity and random modes are
untouched, so their figures are the same under every variant):

    EVK_OVR='{"fresh_floor": 0.0}' python benchmarks/retrieval_variants.py sim 1,2,3,4,5,6,7,8,9,10,11,12 [value,similarity]
    EVK_OVR='{"fresh_floor": 0.0}' python benchmarks/retrieval_variants.py real --verifier fake --helpful similar --seeds 1,2,3

`sim` prints {"res": {method: [mean, sd, per-seed]}} (the simulator's mean expected success per attempt as a
share of the oracle's, `SimConfig(seed=s)`, policy seed 0); `real` runs `bench_learning_real.py` with the
given arguments.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from memory import retrieval as R  # noqa: E402

OVR = json.loads(os.environ.get("EVK_OVR", "{}") or "{}")
_post_init = R.RetrievalPolicy.__post_init__


def _post(self: R.RetrievalPolicy) -> None:
    if self.mode == "value":
        for key, value in OVR.items():
            setattr(self, key, value)
    _post_init(self)


R.RetrievalPolicy.__post_init__ = _post  # type: ignore[method-assign]


def sim(seeds: list[int], methods: tuple[str, ...]) -> dict[str, list[float]]:
    from benchmarks.memory_simulation import SimConfig, build_world, run_method

    out: dict[str, list[float]] = {m: [] for m in methods}
    for s in seeds:
        world = build_world(SimConfig(seed=s))
        with tempfile.TemporaryDirectory() as tmp:
            res = {m: run_method(world, m, Path(tmp), 0) for m in ("oracle", *methods)}
        for m in methods:
            out[m].append(res[m].success() / res["oracle"].success())
    return out


def main() -> int:
    if sys.argv[1] == "sim":
        seeds = [int(x) for x in sys.argv[2].split(",")]
        methods = tuple(sys.argv[3].split(",")) if len(sys.argv) > 3 else ("value", "similarity")
        start = time.time()
        out = sim(seeds, methods)
        res = {m: (round(statistics.fmean(v), 4), round(statistics.stdev(v), 4) if len(v) > 1 else 0.0,
                   [round(x, 3) for x in v]) for m, v in out.items()}
        print(json.dumps({"ovr": OVR, "seeds": sys.argv[2], "res": res, "s": round(time.time() - start)}))
        return 0
    import bench_learning_real

    return bench_learning_real.main(sys.argv[2:])


if __name__ == "__main__":
    raise SystemExit(main())
