"""KernelBench fidelity of the task layer: memory estimates without allocating, refusal of too-big problems,
degenerate-task detection in the probe, and no degenerate task in the built-in suite.

The KernelBench-style files under tests/candidates/kernelbench/ are our own, written in KernelBench's format.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.tasks import (
    MemoryEstimate,
    TaskError,
    builtin_tasks,
    check_task_memory,
    estimate_task_memory,
    load_task,
    memory_refusal,
    validate_task,
)
from verifier.correctness.compare import degenerate_answers

KB = Path(__file__).resolve().parents[1] / "candidates" / "kernelbench"


def _kb(level: int, problem: int):
    return load_task(kernelbench=KB, level=level, problem=problem)


def test_memory_estimate_of_a_huge_problem_allocates_nothing(monkeypatch):
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "64")  # a machine with room for the advice
    huge = _kb(1, 100)  # 4096 x 393216 fp32: 6 GiB in, 6 GiB out
    est = estimate_task_memory(huge, use_cache=False)
    assert est is not None
    assert est.inputs_bytes == 4096 * 393216 * 4 and est.outputs_bytes == est.inputs_bytes
    assert est.bytes == est.inputs_bytes + est.peak_bytes and est.peak_bytes >= est.outputs_bytes
    assert est.inputs[0].shape == [4096, 393216] and est.outputs[0].short() == "out: 4096x393216 f32"
    with pytest.raises(TaskError) as info:
        check_task_memory(huge, 8.0)
    msg = str(info.value)
    assert "\n" not in msg
    assert "about 12.0 GiB" in msg and "8 GiB memory limit" in msg and "--memory-gb 15" in msg
    assert check_task_memory(huge, 16.0).bytes == est.bytes       # fits under a raised limit
    assert estimate_task_memory(huge) == est                       # cached by source


def test_memory_estimate_counts_weights_and_intermediates():
    est = estimate_task_memory(_kb(2, 12), use_cache=False)
    assert est.weights_bytes == (256 * 128 + 128 + 128 + 128) * 4
    assert est.inputs_bytes == 64 * 256 * 4 and est.outputs_bytes == 64 * 128 * 4
    attention = estimate_task_memory(_kb(3, 7), use_cache=False)
    assert attention.peak_bytes > 4 * 64 * 64 * 4 * 3      # q/k/v and the attention matrix at least
    assert attention.weights_bytes >= 64 * 64 * 4             # the tril mask buffer counts too


def test_memory_refusal_message(monkeypatch):
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "64")
    est = MemoryEstimate(bytes=3 * 1024**3, weights_bytes=0, inputs_bytes=1024**3, peak_bytes=2 * 1024**3,
                         outputs_bytes=1024**3, inputs=[], outputs=[])
    assert memory_refusal("t", est, 4.0) is None
    line = memory_refusal("t", est, 2.0, flag="--memory-gb")
    assert line == ("task t needs about 3.0 GiB (inputs 1.0 GiB, weights 0 B, forward peak 2.0 GiB) for one reference "
                    "run, over the 2 GiB memory limit; raise it with --memory-gb 4 or use a smaller problem size")


def test_estimate_is_none_when_the_task_cannot_run_on_meta(tmp_path):
    source = _kb(1, 19).source.replace("return torch.relu(x)", "return x[x.nonzero(as_tuple=True)]")
    path = tmp_path / "1_Nonzero.py"
    path.write_text(source)
    assert estimate_task_memory(load_task(str(path)), use_cache=False) is None


def test_probe_has_a_memory_limit():
    with pytest.raises(TaskError, match=r"memory limit|--memory-gb|alloc"):
        validate_task(_kb(1, 100), memory_gb=2.0, timeout_s=60)


def test_probe_flags_degenerate_tasks():
    flat = _kb(1, 41)
    assert validate_task(flat, degenerate="kernelbench").degenerate == []
    found = validate_task(flat, degenerate="v0").degenerate
    assert "zeros" in found and "a constant" in found
    loss = validate_task(_kb(1, 12), degenerate="v0")
    assert loss.outputs[0].shape == [] and loss.outputs[0].short() == "out: scalar f32"
    assert loss.degenerate == ["outputs that ignore the inputs"]
    assert validate_task(_kb(2, 12), degenerate="v0").degenerate == []


def _outputs(task, seed: int):
    import torch

    ns: dict = {}
    exec(compile(task.source, task.name, "exec"), ns)
    torch.manual_seed(0)
    model = ns["Model"](*ns["get_init_inputs"]())
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model(*ns["get_inputs"]())
    outs = list(out) if isinstance(out, list | tuple) else [out]
    return [o.float().numpy() if o.is_floating_point() else o.numpy() for o in outs]


@pytest.mark.parametrize("task", builtin_tasks(), ids=lambda t: t.name)
def test_no_builtin_task_is_degenerate(task):
    """At the loosest preset (1e-2 for every dtype) no trivial answer passes any built-in task."""
    trials = [_outputs(task, seed) for seed in (1, 2)]
    assert degenerate_answers(trials, atol=1e-2, rtol=1e-2) == [], task.name
    assert all(np.isfinite(o).all() for t in trials for o in t)


def test_tasks_command_lists_a_kernelbench_checkout_with_shapes():
    import json

    from click.testing import CliRunner

    from evokernel_tui.cli import cli

    result = CliRunner().invoke(cli, ["tasks", "--kernelbench", str(KB), "--level", "1", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert list(rows) == ["12_Mse_Loss", "19_ReLU", "41_Flat_Softmax", "100_Huge_ReLU"]   # by problem number
    assert rows["19_ReLU"]["inputs"] == ["x: 64x4096 f32"] and rows["19_ReLU"]["outputs"] == ["out: 64x4096 f32"]
    assert rows["12_Mse_Loss"]["outputs"] == ["out: scalar f32"]
    assert rows["100_Huge_ReLU"]["fits"] is False and rows["19_ReLU"]["fits"] is True
    table = CliRunner().invoke(cli, ["tasks", "--kernelbench", str(KB)], env={"COLUMNS": "200"})
    assert table.exit_code == 0 and "7_Causal_Attention" in table.output and "12.0 GiB > 8 GiB" in table.output
    missing = CliRunner().invoke(cli, ["tasks", "--kernelbench", str(KB / "nope")])
    assert missing.exit_code != 0 and "does not exist" in missing.output and "Traceback" not in missing.output
    none = CliRunner().invoke(cli, ["tasks", "--kernelbench", str(KB), "--level", "4"])
    assert none.exit_code != 0 and "no KernelBench problems for level 4" in none.output


def test_draft_refuses_a_too_big_problem_before_any_model_call(tmp_path, monkeypatch):
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "64")
    from click.testing import CliRunner

    from evokernel_tui.cli import cli

    args = ["draft", "--kernelbench", str(KB), "--level", "1", "--problem", "100", "--model",
            "scripted:examples/relu_scripted.json", "--sessions-dir", str(tmp_path), "--no-memory"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "about 12.0 GiB" in result.output and "--memory-gb 15" in result.output
    assert not any(tmp_path.iterdir())                                   # no session was made
    # With room for it the size check passes and the model's check comes next: a provider without its key
    # stops the command there, in one line. (A scripted file that does not exist stopped it too, but only
    # once the task's probe had run the 12 GiB reference: 20-55 s.)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    raised = CliRunner().invoke(cli, [*args[:7], "--memory-gb", "16", "--model", "openai/gpt-4o-mini",
                                      "--sessions-dir", str(tmp_path), "--no-memory"])
    assert "about 12.0 GiB" not in raised.output                         # past the check, stopped by the model
    assert raised.exit_code != 0 and "no API key; set OPENAI_API_KEY" in raised.output, raised.output
    assert not any(tmp_path.iterdir())


def test_a_missing_kernelbench_import_names_the_extra(tmp_path):
    import importlib.util

    if importlib.util.find_spec("einops") is not None:
        pytest.skip("einops is installed here")
    path = tmp_path / "3_Einops_Block.py"
    path.write_text(_kb(1, 19).source.replace("import torch\n", "import torch\nfrom einops import rearrange\n", 1))
    with pytest.raises(TaskError, match=r"No module named 'einops'.*pip install -e '\.\[kernelbench\]'"):
        validate_task(load_task(str(path)))


def test_pyproject_has_the_kernelbench_extra():
    import tomllib

    data = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    assert any(d.startswith("einops") for d in data["project"]["optional-dependencies"]["kernelbench"])


def test_estimate_of_a_task_that_moves_tensors_to_the_gpu(tmp_path):
    """KernelBench files often call .cuda() or pass device="cuda": the estimate stays on meta, even here
    without a GPU, and keeps dtype changes."""
    source = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n).cuda()
        self.register_buffer("m", torch.ones(n, device="cuda"))

    def forward(self, x):
        return self.lin(x.to("cuda", torch.float16).float()) + self.m


def get_inputs():
    return [torch.randn(1024, 2048).cuda()]


def get_init_inputs():
    return [2048]
'''
    path = tmp_path / "5_Cuda_Linear.py"
    path.write_text(source)
    est = estimate_task_memory(load_task(str(path)), use_cache=False)
    assert est is not None
    assert est.weights_bytes == (2048 * 2048 + 2048 + 2048) * 4 and est.inputs_bytes == 1024 * 2048 * 4
    assert est.outputs[0].short() == "out: 1024x2048 f32"


GIB = 1024**3


def _twelve_gib() -> MemoryEstimate:
    return MemoryEstimate(bytes=12 * GIB, weights_bytes=0, inputs_bytes=6 * GIB, peak_bytes=6 * GIB,
                          outputs_bytes=6 * GIB, inputs=[], outputs=[])


def test_memory_advice_never_exceeds_what_the_machine_has():
    """Issue 34: a 12 GiB task was told `--memory-gb 15` on a machine with about 20 GiB free, and following
    the advice took the machine's memory from 20.5 to 4.8 GB; on a smaller machine the advice was worse."""
    est = _twelve_gib()
    roomy = memory_refusal("t", est, 8.0, available_bytes=23 * GIB)
    assert "raise it with --memory-gb 15 or use" in roomy                           # room for the headroom
    tight = memory_refusal("t", est, 8.0, available_bytes=int(13.5 * GIB))
    assert "raise it with --memory-gb 13.5 (about all the 13.5 GiB this machine has available)" in tight
    assert "raise it with --memory-gb 12 (about all" in memory_refusal("t", est, 8.0, available_bytes=int(12.05 * GIB))
    for available in (int(7.4 * GIB), int(11.9 * GIB)):                             # cannot fit the machine at all
        line = memory_refusal("t", est, 8.0, available_bytes=available)
        assert "it cannot run here" in line and "raise it" not in line and "\n" not in line, line
        assert f"only {available / GIB:.1f} GiB available" in line
    under_limit = memory_refusal("t", est, 16.0, available_bytes=10 * GIB)          # fits the limit, not the machine
    assert under_limit is not None and "only 10.0 GiB available: it cannot run here" in under_limit
    assert memory_refusal("t", est, 16.0, available_bytes=20 * GIB) is None


def test_available_memory_is_read_from_the_machine(monkeypatch):
    from core.tasks import available_memory_bytes

    monkeypatch.delenv("EVOKERNEL_AVAILABLE_GB", raising=False)
    found = available_memory_bytes()
    meminfo = Path("/proc/meminfo")
    if meminfo.exists():
        kb = next(int(line.split()[1]) for line in meminfo.read_text().splitlines() if line.startswith("MemAvailable:"))
        assert found is not None and abs(found - kb * 1024) < 2 * GIB                # psutil or /proc/meminfo
    monkeypatch.setenv("EVOKERNEL_AVAILABLE_GB", "6.5")                             # a container's own limit
    assert available_memory_bytes() == int(6.5 * GIB)
