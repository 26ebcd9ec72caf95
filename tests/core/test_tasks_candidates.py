"""The honest C++ candidates in tests/candidates/cpu match their built-in task and avoid the reference ops.

Each candidate builds a C++ extension (15-30 s the first time; torch caches the build afterwards).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.tasks import builtin_index, load_task

CANDIDATE_DIR = Path(__file__).resolve().parents[1] / "candidates" / "cpu"
CANDIDATES = sorted(p.stem for p in CANDIDATE_DIR.glob("*.py"))

# reference ops a candidate must not lean on for its main compute (Python or C++)
FORBIDDEN = re.compile(
    r"torch\.(relu|softmax|log_softmax|matmul|mm|bmm|addmm|sum|mean|layer_norm|erf|nn\.functional)\b"
    r"|\bF\.\w+\("
    r"|\bat::\w+\("
    r"|torch::(relu|softmax|matmul|mm|addmm|sum|layer_norm|linear|gelu|erf)\b"
    r"|self\.(norm|linear)\("
    r"|\.(sum|softmax|relu|matmul|mean)\("
)


def _exec(source: str, label: str) -> dict:
    namespace: dict = {"__name__": label}
    exec(compile(source, label, "exec"), namespace)
    return namespace


def test_candidate_set_covers_required_tasks():
    names = {m.name for m in builtin_index()}
    assert set(CANDIDATES) <= names
    assert {"relu", "softmax_rows", "sum_rows", "layernorm", "matmul", "gemm_bias_relu"} <= set(CANDIDATES)
    assert any(m.level == 2 and m.name in CANDIDATES for m in builtin_index())


@pytest.mark.parametrize("name", CANDIDATES)
def test_candidate_source_is_honest(name):
    source = (CANDIDATE_DIR / f"{name}.py").read_text()
    assert "load_inline(" in source and "data_ptr<float>()" in source
    assert "class ModelNew" in source
    hit = FORBIDDEN.search(source)
    assert hit is None, f"{name} calls a reference op: {hit.group(0)!r}"


@pytest.mark.slow
@pytest.mark.parametrize("name", CANDIDATES)
def test_candidate_matches_reference(name, shared_build_root, monkeypatch):
    import torch
    from torch.utils import cpp_extension

    from verifier.build.split_build import InlineBuilder

    # the suite's shared, hash-keyed builder: same compiler and flags, a fraction of plain load_inline's time
    monkeypatch.setattr(cpp_extension, "load_inline", InlineBuilder(shared_build_root).load_inline)
    task = load_task(name)
    ref = _exec(task.source, f"ref_{name}")
    cand = _exec((CANDIDATE_DIR / f"{name}.py").read_text(), f"cand_{name}")
    init_args = ref["get_init_inputs"]()
    torch.manual_seed(1234)
    model = ref["Model"](*init_args)
    torch.manual_seed(1234)
    model_new = cand["ModelNew"](*init_args)
    for seed in (0, 1):
        torch.manual_seed(seed)
        inputs = ref["get_inputs"]()
        with torch.no_grad():
            expected = model(*inputs)
            got = model_new(*inputs)
        assert got.shape == expected.shape and got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, atol=1e-2, rtol=1e-2)


@pytest.mark.parametrize("name", ["relu", "softmax_rows", "sum_rows", "layernorm", "matmul", "gemm_bias_relu"])
def test_honesty_check_flags_the_reference_itself(name):
    assert FORBIDDEN.search(load_task(name).source) is not None
