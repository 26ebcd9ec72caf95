"""Numerics probes of the correctness gate (verifier/correctness/probes.py): large-magnitude inputs and held-out shapes.

Fast tests cover the pure parts (the scaled distribution, the shape variants, the magnitude-relative
comparison, the reference worker's records); the slow ones verify real C++ candidates end to end:
a softmax without max subtraction (refused by the large-magnitude probe), a ReLU that drops the
`numel % 4096` tail (refused by a held-out shape), honest relu and softmax (feasible), a ReLU that
TORCH_CHECKs the task's exact shape (feasible, with the note) and a fixed-weight matmul whose first
held-out shape the reference cannot take (skipped cleanly)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from verifier import VerifyConfig
from verifier.correctness import probes
from verifier.correctness.compare import compare_tensor
from verifier.correctness.input_recipe import capture, dist_scale, draw, scaled
from verifier.result import VerificationResult

REPO = Path(__file__).resolve().parents[2]
NUMERICS = REPO / "tests" / "candidates" / "numerics"
HONEST = REPO / "tests" / "candidates" / "cpu"

# small tasks: the hostile candidates are written for any size
RELU_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256, 512)]


def get_init_inputs():
    return []
'''

SOFTMAX_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(128, 256)]


def get_init_inputs():
    return []
'''

# a matmul with a fixed weight: the model takes other batch sizes but not other feature sizes
FIXED_WEIGHT_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(96, 64))

    def forward(self, x):
        return x @ self.weight


def get_inputs():
    return [torch.randn(128, 96)]


def get_init_inputs():
    return []
'''

FIXED_WEIGHT_CANDIDATE = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>

torch::Tensor mm_forward(torch::Tensor x, torch::Tensor w) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32, "float32 only");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(0), "shapes do not match");
    auto xc = x.contiguous();
    auto wc = w.contiguous();
    const int64_t n = xc.size(0), k = xc.size(1), m = wc.size(1);
    auto out = torch::empty({n, m}, xc.options());
    const float* a = xc.data_ptr<float>();
    const float* b = wc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < m; ++j) o[i * m + j] = 0.0f;
        for (int64_t p = 0; p < k; ++p) {
            const float av = a[i * k + p];
            for (int64_t j = 0; j < m; ++j) o[i * m + j] += av * b[p * m + j];
        }
    }
    return out;
}
"""

_ext = load_inline(name="evk_candidate_fixed_weight_mm", cpp_sources=[CPP], functions=["mm_forward"],
                   extra_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(96, 64))

    def forward(self, x):
        return _ext.mm_forward(x, self.weight)
'''


# ------------------------------------------------------------------------------------------- fast ones
def test_scaled_distribution_is_the_task_draw_times_the_scale():
    recipe = capture(torch, lambda: [torch.randn(8, 16), torch.randint(0, 5, (8,)), 3])
    assert scaled(100) == "x100" and dist_scale("x100") == 100.0 and dist_scale("x1e4") == 1e4
    assert dist_scale("task") is None and dist_scale("heavy") is None and dist_scale("x-1") is None
    base, big = draw(torch, recipe, 7, "task", "cpu"), draw(torch, recipe, 7, "x100", "cpu")
    assert torch.equal(big[0], base[0] * 100)
    assert torch.equal(big[1], base[1]) and big[2] == 3  # integers and values unchanged


def test_reference_worker_file_path_scales_too():
    from verifier.workers.reference_worker import draw_inputs

    class Task:
        @staticmethod
        def get_inputs():
            return [torch.rand(4, 4) * 2 - 1]

    a, b = draw_inputs(torch, Task, 5, "task", "cpu"), draw_inputs(torch, Task, 5, "x100", "cpu")
    assert torch.allclose(b[0], a[0] * 100)


FIXED_SCALES = [100.0, 10000.0]  # the scales before issue 37 drew them: these tests name their probes


def test_probe_trials_and_switches():
    on = probes.probe_trials(VerifyConfig(magnitude_scales=FIXED_SCALES))
    assert [t["name"] for t in on] == ["inputs x100", "inputs x10000", "held-out shapes #1", "held-out shapes #2",
                                       "held-out shapes #3"]
    assert probes.off_records(VerifyConfig()) == []
    off = VerifyConfig(magnitude_probe=False, shape_probe=False)
    assert probes.probe_trials(off) == []
    assert [r["status"] for r in probes.off_records(off)] == ["off", "off"]
    assert [t["dist"] for t in probes.probe_trials(VerifyConfig(shape_probe=False, magnitude_scales=[1e3]))] == ["x1000"]
    drawn = [t for t in probes.probe_trials(VerifyConfig()) if t["probe"] == "magnitude"]
    assert len(drawn) == 2 and all(t["name"] == f"inputs {t['dist']}" for t in drawn)


def test_shape_variants_leave_tails_and_stay_small():
    relu = capture(torch, lambda: [torch.randn(2048, 4096)])
    labels, primes = set(), set()
    for seed in range(40):
        first, second = (v["recipe"][0]["shape"] for v in probes.shape_variants(relu, seed)[:2])
        assert (first[0] * first[1]) % 4096 != 0 and first[0] * first[1] <= 2048 * 4096
        assert all(s % 2 for s in first) and first[0] < 2048 and first[1] < 4096
        assert second[1] == 4096 and 3 <= second[0] < 2048 and second[0] % 2
        labels.add((tuple(first), tuple(second)))
        primes.update(probes.prev_prime(s) == s for s in (*first, second[0]))
    assert len(labels) > 30  # drawn per verification (they were 509x509 and 61x4096 every time)
    assert primes == {True, False}  # prime only by chance: a kernel cannot take "prime" for "probe"
    # equal sizes stay equal (a matmul's shared dimension), different ones stay different
    bmm = capture(torch, lambda: [torch.randn(64, 256, 128), torch.randn(64, 128, 256)])
    a, b = (e["shape"] for e in probes.shape_variants(bmm)[0]["recipe"])
    assert a[0] == b[0] and a[2] == b[1] and a[1] == b[2] and len({a[0], a[1], a[2]}) == 3
    # no recipe: both skipped, saying why
    assert all("recipe" in v["skip"] for v in probes.shape_variants(None))
    # a deterministic choice: the trusted worker and the tests agree
    assert probes.shape_variants(relu) == probes.shape_variants(relu)


def test_held_out_shape_three_is_drawn_and_all_prime_only_sometimes():
    """Before: #3 was drawn but every size prime, every time: "all sizes prime" meant "held-out shape #3",
    and a kernel right only on prime sizes (or that spots them) passed it. Now its sizes are drawn from the
    probe's secret seed, odd, in the task's size class and past 2^20 elements; all prime in some seeds
    (about `PRIME_SHARE`), a multiple of 64 plus a prime tail in the rest."""
    relu = capture(torch, lambda: [torch.randn(2048, 4096)])
    shapes, all_prime, multiple_of_64_plus_tail = set(), 0, 0
    for seed in range(80):
        third = probes.shape_variants(relu, seed)[2]
        assert third["label"] == "x".join(map(str, third["recipe"][0]["shape"]))
        rows, cols = third["recipe"][0]["shape"]
        assert rows % 2 and cols % 2 and (rows * cols) % 4096  # a tail past every power-of-two block
        assert 2048 - 128 <= rows <= 2048 and 4096 - 256 <= cols <= 4096  # the task's own size class
        assert rows * cols >= probes.LARGE_FLOOR
        shapes.add((rows, cols))
        all_prime += probes.prev_prime(rows) == rows and probes.prev_prime(cols) == cols
        multiple_of_64_plus_tail += all(s % 64 in probes.TAIL_PRIMES and probes.prev_prime(s) != s for s in (rows, cols))
    assert len(shapes) > 60  # drawn per verification
    assert 5 <= all_prime <= 50  # possible, not certain
    assert multiple_of_64_plus_tail >= 20
    assert probes.shape_variants(relu, 7)[2] == probes.shape_variants(relu, 7)[2]  # the same on both sides
    # a small task still grows past the usual size thresholds, prime or not
    small = capture(torch, lambda: [torch.randn(64, 128)])
    grown = [probes.shape_variants(small, seed)[2]["recipe"][0]["shape"] for seed in range(40)]
    assert all(r * c >= probes.LARGE_FLOOR and r % 2 and c % 2 for r, c in grown)
    assert {probes.prev_prime(r) == r for r, _c in grown} == {True, False}


def test_prev_prime():
    assert [probes.prev_prime(n) for n in (2, 3, 4, 10, 1024, 4095)] == [2, 3, 3, 7, 1021, 4093]


def test_outputs_consistent():
    task = [{"shape": [128, 64], "dtype": "float32"}]
    assert probes.outputs_consistent(task, [{"shape": [127, 64], "dtype": "float32"}]) is None
    assert "[127] there" in probes.outputs_consistent(task, [{"shape": [127], "dtype": "float32"}])
    assert probes.outputs_consistent(task, [{"shape": [127, 64], "dtype": "float64"}])
    assert probes.outputs_consistent(task, [])


def test_magnitude_comparison_scales_atol_and_names_non_finite():
    want = np.full((4, 1024), 1e6, dtype=np.float32)
    want[0, 0] = 0.0
    got = want.copy()
    got[0, 0] = 5.0  # an absolute error of 5 at an output magnitude of 1e6: rounding, passes
    assert not compare_tensor(got, want, "float32", "float32", None, None, "output 0").ok
    assert compare_tensor(got, want, "float32", "float32", None, None, "output 0", magnitude=True).ok
    # a real error at that magnitude (10% of it) still fails
    got[0, 0] = 1e5
    assert not compare_tensor(got, want, "float32", "float32", None, None, "output 0", magnitude=True).ok
    # inf where the reference is finite: the count, said plainly
    got = want.copy()
    got[1, :] = np.inf
    cmp = compare_tensor(got, want, "float32", "float32", None, None, "output 0", magnitude=True)
    assert not cmp.ok and cmp.reason == "output 0: 1024 of 4096 elements inf where the reference is finite"
    got[2, :3] = np.nan
    cmp = compare_tensor(got, want, "float32", "float32", None, None, "output 0", magnitude=True)
    assert "1027 of 4096 elements inf (1024) or nan (3)" in cmp.reason
    # small outputs: max(1, M) = 1, so the probe's own floor (1e-2 absolute) is the rule
    small = np.full(8, 0.5, dtype=np.float32)
    assert compare_tensor(small + 1e-3, small, "float32", "float32", None, None, "o", magnitude=True).ok
    assert not compare_tensor(small + 5e-2, small, "float32", "float32", None, None, "o", magnitude=True).ok


def test_verdict_round_trips_probes_and_notes():
    recs = [probes.record({"probe": "magnitude", "name": "inputs x100"}, "skip", "the reference is not finite"),
            probes.record({"probe": "shape", "name": "held-out shapes #1", "label": "509x509"}, "refused",
                          "RuntimeError: 2048x4096 only")]
    result = VerificationResult(backend="cpu", gates=[], probes=recs)
    assert VerificationResult.from_dict(result.to_dict()).probes == recs
    notes = probes.notes(recs)
    assert notes[0].startswith("handles only the task's shapes: the kernel raised on held-out shapes 509x509")
    assert notes[1] == "probe inputs x100 skipped: the reference is not finite"


class _Channel:
    def __init__(self):
        self.marks = []

    def mark(self, phase, **extra):
        self.marks.append((phase, extra))


def _prepare(tmp_path: Path, source: str, trials: list[dict]) -> dict:
    from verifier.workers.reference_worker import Worker

    tmp_path.mkdir(parents=True, exist_ok=True)
    task = tmp_path / "task.py"
    task.write_text(source)
    trusted = tmp_path / "trusted"
    for sub in ("init", "weights", "profile"):
        (trusted / sub).mkdir(parents=True)
    for i, t in enumerate(trials):
        (trusted / f"trial{i}").mkdir()
        t["dir"] = str(trusted / f"trial{i}")
    return Worker(_Channel()).prepare({"task_path": str(task), "init_seed": 1, "trials": trials,
                                       "init_dir": str(trusted / "init"), "weights_dir": str(trusted / "weights"),
                                       "profile_dir": str(trusted / "profile"), "profile_seed": 13, "device": "cpu",
                                       "threads": 1, "recipe": True})


def probes_recipe(*shape: int) -> list[dict]:
    return [{"kind": "tensor", "shape": list(shape), "dtype": "float32"}]


def _with_probes(config: VerifyConfig) -> list[dict]:
    trials = [{"seed": 11, "dist": "task"}]
    return trials + [{**spec, "seed": 20 + i} for i, spec in enumerate(probes.probe_trials(config))]


def test_reference_worker_records_and_skips_probes(tmp_path):
    exp_task = RELU_TASK.replace("torch.relu(x)", "torch.exp(x)")
    out = _prepare(tmp_path / "exp", exp_task, _with_probes(VerifyConfig(magnitude_scales=FIXED_SCALES)))
    by_name = {t.get("name"): t for t in out["trials"][1:]}
    assert "not finite" in by_name["inputs x100"]["skip"]  # exp(100 * randn) overflows in the reference
    first = by_name["held-out shapes #1"]
    assert "skip" not in first and first["label"] == probes.shape_variants(probes_recipe(256, 512), 22)[0]["label"]
    assert first["outputs"][0]["shape"] == first["recipe"][0]["shape"]
    assert out["output_bytes"] == 256 * 512 * 4  # the task's outputs, not a probe's

    fixed = _prepare(tmp_path / "fixed", FIXED_WEIGHT_TASK, _with_probes(VerifyConfig(magnitude_probe=False)))
    first, second, _drawn = fixed["trials"][1:]
    assert first["skip"].startswith("the reference raised RuntimeError")  # another feature size @ 96x64
    assert "skip" not in second and second["label"].endswith("x96") and second["label"] != "128x96"


# ------------------------------------------------------------------------------------------- real runs
def _verify(make_config, task_source: str, candidate: Path | str, **overrides) -> dict:
    """verify() on the CPU without timing (the probes are correctness trials), as a verdict dict."""
    from verifier import verify

    source = candidate.read_text() if isinstance(candidate, Path) else candidate
    config = make_config(time_kernels=False, **overrides)
    return verify(task_source, source, "cpu", config).to_dict()


def _cli(task: Path, candidate: Path, *extra: str) -> dict:
    """`evokernel verify TASK CANDIDATE --json --no-cache ...`, its verdict."""
    cmd = [sys.executable, "-m", "evokernel_tui.cli", "verify", str(task), str(candidate), "--json", "--no-cache",
           "--trials", "2", "--no-degenerate-check", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=900)
    assert proc.stdout.strip(), proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _gate(verdict: dict, name: str) -> dict:
    return next(g for g in verdict["gates"] if g["name"] == name)


def _probe_status(verdict: dict) -> dict[str, str]:
    return {p["name"]: p["status"] for p in verdict["probes"]}


@pytest.mark.slow
def test_softmax_without_max_subtraction_is_refused_by_the_magnitude_probe(tmp_path, make_config):
    task = tmp_path / "softmax_task.py"
    task.write_text(SOFTMAX_TASK)
    v = _verify(make_config, SOFTMAX_TASK, NUMERICS / "softmax_no_max.py", magnitude_scales=FIXED_SCALES)
    correct = _gate(v, "correctness")
    assert not v["feasible"] and correct["status"] == "fail"
    assert correct["reason"].startswith("inputs x100 (seed "), correct["reason"]
    assert "elements nan where the reference is finite" in correct["reason"] or "inf" in correct["reason"]
    assert _probe_status(v)["inputs x100"] == "fail"
    # without the probe the same kernel is feasible: the task's own inputs are kind to it
    off = _cli(task, NUMERICS / "softmax_no_max.py", "--no-magnitude-probe")
    assert off["feasible"], _gate(off, "correctness")["reason"]
    assert {"probe": "magnitude", "name": "large-magnitude inputs", "status": "off",
            "reason": "switched off (--no-magnitude-probe)"} in off["probes"]


@pytest.mark.slow
def test_relu_dropping_the_tail_is_refused_by_a_held_out_shape(make_config):
    v = _verify(make_config, RELU_TASK, NUMERICS / "relu_drops_tail.py", magnitude_scales=FIXED_SCALES)
    correct = _gate(v, "correctness")
    assert not v["feasible"] and re.match(r"held-out shapes \d+x\d+ \(seed ", correct["reason"]), correct["reason"]
    assert _probe_status(v)["inputs x100"] == "pass" and _probe_status(v)["held-out shapes #1"] == "fail"


@pytest.mark.slow
@pytest.mark.parametrize(("task_source", "candidate"), [(RELU_TASK, "relu.py"), (SOFTMAX_TASK, "softmax_rows.py")],
                         ids=["relu", "softmax"])
def test_honest_kernels_pass_every_probe(make_config, task_source, candidate):
    v = _verify(make_config, task_source, HONEST / candidate)
    assert v["feasible"], _gate(v, "correctness")["reason"]
    assert set(_probe_status(v).values()) == {"pass"}, v["probes"]
    assert len(v["probes"]) == 5


@pytest.mark.slow
def test_kernel_checking_the_task_shape_is_feasible_with_a_note(make_config):
    source = (NUMERICS / "relu_task_shape_only.py").read_text()
    source = source.replace("2048 && x.size(1) == 4096", "256 && x.size(1) == 512").replace("2048 * 4096", "256 * 512")
    v = _verify(make_config, RELU_TASK, source, magnitude_scales=FIXED_SCALES)
    assert v["feasible"], _gate(v, "correctness")["reason"]
    assert _probe_status(v) == {"inputs x100": "pass", "inputs x10000": "pass", "held-out shapes #1": "refused",
                                "held-out shapes #2": "refused", "held-out shapes #3": "refused"}
    assert any(n.startswith("handles only the task's shapes") and re.search(r"\d+x\d+", n) for n in v["notes"]), v["notes"]


@pytest.mark.slow
def test_a_model_that_cannot_take_other_shapes_skips_the_variant(make_config):
    v = _verify(make_config, FIXED_WEIGHT_TASK, FIXED_WEIGHT_CANDIDATE, magnitude_scales=FIXED_SCALES)
    assert v["feasible"], _gate(v, "correctness")["reason"]
    status = _probe_status(v)
    assert list(status) == ["inputs x100", "inputs x10000", "held-out shapes #1", "held-out shapes #2",
                            "held-out shapes #3"]  # trial order
    assert status["held-out shapes #1"] == "skip" and status["held-out shapes #2"] == "pass"
    skipped = next(p for p in v["probes"] if p["status"] == "skip")
    assert skipped["reason"].startswith("the reference raised RuntimeError")
    assert any(n.startswith("probe held-out shapes #1 skipped: the reference raised") for n in v["notes"])
