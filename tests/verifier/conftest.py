"""Shared fixtures for the verifier tests.

One build root per test run, the root conftest's (`shared_build_root`): the precompiled headers and the
pybind TUs are built once and shared by every test that builds (honest: each test still compiles its own kernel source and runs it fresh).
Dynamic hostile candidates share one extension name and one function signature, so after the first
build each costs only its kernel TU and a link (~1.5 s).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.tasks import load_task
from verifier import VerifyConfig

CANDIDATES = Path(__file__).resolve().parents[1] / "candidates"
HOSTILE = CANDIDATES / "hostile"
HONEST = CANDIDATES / "cpu"
SHARED_EXT = "evk_test_shared"
MARK = re.compile(r"HACK: ([\w-]+)")


def hack_marks(source: str) -> list[tuple[str, int]]:
    """(rule, line) for every `# HACK: rule` comment, in line order: what the scan must report."""
    return [(m.group(1), i) for i, text in enumerate(source.splitlines(), 1) for m in MARK.finditer(text)]


def shared_kernel(body: str, forward: str = "return _ext.kernel_forward(x)", prelude: str = "") -> str:
    """A relu-task candidate whose C++ `kernel_forward(x)` has `body`; same name and flags every time."""
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline
{prelude}
CPP = r"""
#include <torch/extension.h>

torch::Tensor kernel_forward(torch::Tensor x) {{
{body}
}}
"""

_ext = load_inline(
    name="{SHARED_EXT}",
    cpp_sources=[CPP],
    functions=["kernel_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        {forward}
'''


RELU_BODY = """    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const float* in = xc.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) o[i] = in[i] > 0.0f ? in[i] : 0.0f;
    return out;"""


@pytest.fixture(scope="session")
def build_root(shared_build_root) -> Path:
    """The run's one build root: the root conftest's `EVOKERNEL_BUILD_DIR` (`EVOKERNEL_TEST_BUILD_DIR`
    when set, so a warm root is reused across runs), shared with every other test package."""
    return shared_build_root


# The latency gate's rounds for a test whose assertions are not about timing: the calibration round and two
# measured rounds, no warm-up rounds (3 rounds). Every timed call's outputs are still checked and the gate
# still passes or fails as it would; only the interval is wider. A test about the clock, the rounds or what
# happens during timing asks for `make_config(timing="full")`: 2 warm-up rounds and 5 measured (8 rounds,
# about half of a relu verification on 2 cores).
QUICK_TIMING = {"min_rounds": 2, "warmup_rounds": 0}
FULL_TIMING = {"min_rounds": 5, "warmup_rounds": None}


@pytest.fixture(scope="session")
def make_config(build_root):
    """Settings for real runs: no verdict cache, two trials, short timing (same everywhere, so the
    reference run of each task is computed once per session). `timing="full"` for tests about timing
    (see QUICK_TIMING); other fields given override these."""

    def make(timing: str = "quick", **overrides) -> VerifyConfig:
        rounds = {"quick": QUICK_TIMING, "full": FULL_TIMING}[timing]
        base = dict(build_root=str(build_root), use_cache=False, trials=2, warmup=1, min_reps=3, max_reps=10,
                    min_time_s=0.05, run_timeout_s=120.0, build_timeout_s=240.0, timing_budget_s=0.5,
                    min_rounds=rounds["min_rounds"], warmup_rounds=rounds["warmup_rounds"])
        base.update(overrides)
        return VerifyConfig(**base)

    return make


@pytest.fixture(scope="session")
def kernel_source():
    """`shared_kernel(body, forward=..., prelude=...)`: a candidate on the session's shared extension."""
    return shared_kernel


@pytest.fixture(scope="session")
def task_source():
    return lambda name: load_task(name).source
