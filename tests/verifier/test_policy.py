"""The rule registry and its presets: kernelbench lets libraries do part of the work (reported with their
share), strict does not; every rule the verifier can raise is registered; the policy is recorded and
checked wherever a verdict or a bench run can be compared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from evokernel_tui.cli import cli
from verifier.policy.rules import (
    KERNELBENCH,
    LIBRARY_FAMILIES,
    PRESETS,
    REGISTRY,
    STRICT,
    Policy,
    PolicyError,
    finding_rule,
    make_policy,
)

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "tests" / "candidates" / "policy" / "library_gemm_fused_epilogue.py"
RAISED = re.compile(r'(?:Violation\(|self\.add\(|\(|found\.append\(\()\s*"([a-z]+(?:-[a-z]+)+)",')


def raised_rule_names() -> set[str]:
    """Every rule name the verifier's code raises (a Violation, the scanner's add, a (rule, message) pair)."""
    names: set[str] = set()
    for path in (ROOT / "verifier").rglob("*.py"):
        names |= set(RAISED.findall(path.read_text()))
    return names


def test_every_raised_rule_is_registered():
    from verifier.policy.binary_audit import FAMILIES

    raised = raised_rule_names() - set(FAMILIES)  # symbol families of the binary audit, not rules
    assert {"torch-op", "no-custom-kernel", "binary-import", "timed-output", "job-tamper"} <= raised, raised
    missing = raised - set(REGISTRY)
    assert not missing, f"rules raised but not registered: {sorted(missing)}"


def test_an_unregistered_rule_refuses_under_every_preset():
    for preset in PRESETS:
        assert Policy(preset).refuses("a-rule-someone-forgot")


def test_presets_differ_only_in_the_library_rules():
    library = {"torch-op", "tensor-arithmetic", "cpp-torch-op", "cpp-library", "reference-op-at-runtime",
               "torch-work-outside-kernel", "vendor-kernel", "binary-library",
               "anon-exec"}  # torch's own library ops (oneDNN/MKL) JIT their code: reported under kernelbench
    kb, strict = Policy(KERNELBENCH), Policy(STRICT)
    for name in REGISTRY:
        assert strict.refuses(name), name
        assert kb.refuses(name) == (name not in library), name
    for always in ("no-custom-kernel", "custom-kernel-unused", "decoy-kernel", "custom-kernel-skipped", "gpu-stream",
                   "monkey-patch", "try-fallback", "concurrency", "timed-output", "binary-import"):
        assert kb.refuses(always), always


def test_allow_switches_one_rule_off_and_unknown_names_are_one_line():
    p = make_policy("strict", ["torch-op"])
    assert not p.refuses("torch-op") and p.refuses("cpp-torch-op") and p.to_dict() == {"preset": "strict",
                                                                                        "allowed": ["torch-op"]}
    with pytest.raises(PolicyError, match="unknown rule 'torch-opp'.*--list-rules"):
        make_policy("kernelbench", ["torch-opp"])
    with pytest.raises(PolicyError, match="unknown policy 'lenient'"):
        make_policy("lenient")


def test_library_families_match_the_binary_audit():
    from verifier.policy.binary_audit import ATEN_OP, BLAS, FAMILIES

    assert set(LIBRARY_FAMILIES) == {BLAS, ATEN_OP}
    assert {finding_rule(f) for f in FAMILIES} == {"binary-library", "binary-import"}


def test_command_line_policies_match_the_registry():
    from evokernel_tui.options import POLICIES

    assert tuple(POLICIES) == PRESETS


def test_list_rules_and_bad_allow_on_the_command_line(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(cli, ["verify", "--list-rules"], terminal_width=200)
    assert listed.exit_code == 0
    for name in REGISTRY:
        assert name in listed.output, name
    bad = runner.invoke(cli, ["verify", "relu", str(CANDIDATE), "--allow", "nope"])
    assert bad.exit_code == 1 and "unknown rule 'nope'" in bad.output and "Traceback" not in bad.output


def test_config_file_policy_is_checked_and_used(tmp_path, monkeypatch):
    from core.config import ConfigError, load_settings
    from core.verifying import resolve_policy

    cfg = tmp_path / "config.toml"
    monkeypatch.setenv("EVOKERNEL_CONFIG", str(cfg))
    monkeypatch.delenv("EVOKERNEL_POLICY", raising=False)
    cfg.write_text('policy = "strict"\n')
    assert resolve_policy().preset == "strict" and resolve_policy("kernelbench").preset == "kernelbench"
    cfg.write_text('policy = "loose"\n')
    with pytest.raises(ConfigError, match="`policy` must be kernelbench or strict"):
        load_settings()


def test_prompts_state_the_policy_in_force():
    from core.prompting import system_prompt

    kb, strict = system_prompt("cpu", policy="kernelbench"), system_prompt("cpu", policy="strict")
    assert "policy in force: kernelbench" in kb and "may do\n  part of the work" in kb
    assert "policy in force: strict" in strict and "any torch operator doing the work" in strict
    assert "decoy" in kb and "decoy" in strict


def test_bench_compare_refuses_runs_judged_under_different_policies(tmp_path):
    from core.bench import policy_mismatch

    assert policy_mismatch({"policy": "kernelbench"}, {"policy": "kernelbench", "allow": []}) is None
    assert "strict" in policy_mismatch({}, {"policy": "kernelbench"})  # written before policies: strict
    base = {"kind": "evokernel-bench", "format": 1, "outcomes": []}
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({**base, "settings": {"policy": "kernelbench"}}))
    b.write_text(json.dumps({**base, "settings": {"policy": "strict"}}))
    result = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b)])
    assert result.exit_code == 1 and "do not compare" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_library_gemm_with_a_fused_epilogue_kernelbench_yes_strict_no(make_config):
    """KernelBench's commonest level-2 solution: torch.matmul + one custom kernel for bias and ReLU."""
    from core.tasks import load_task
    from verifier import verify

    task = load_task("gemm_bias_relu")
    source = CANDIDATE.read_text()
    kb = verify(task.source, source, config=make_config())
    gate = kb.gate("anti_hacking")
    assert kb.feasible, [(g.name, g.status, g.reason) for g in kb.gates]
    assert kb.policy == {"preset": "kernelbench", "allowed": []}
    assert {v["rule"] for v in gate.detail["reported"]} >= {"torch-op"}
    ops = {o["op"]: o["share"] for o in gate.detail["library_ops"]}
    assert "aten::mm" in ops and ops["aten::mm"] > 0.5, ops
    assert "passes under the kernelbench policy" in gate.reason
    strict = verify(task.source, source, config=make_config(policy="strict"))
    assert not strict.feasible and strict.gate("anti_hacking").detail["rule"] == "torch-op"
    assert strict.policy["preset"] == "strict"
    allowed = verify(task.source, source, config=make_config(policy="strict", allow=["torch-op"]))
    assert not allowed.feasible, "strict still refuses the GEMM at run time"
    assert allowed.gate("anti_hacking").detail["rule"] in {"reference-op-at-runtime", "torch-work-outside-kernel"}
