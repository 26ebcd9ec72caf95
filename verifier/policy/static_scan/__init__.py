"""Static anti-hacking rules: read the candidate's Python AST and its embedded C++ without running it.

Every rule names itself and the line, so a person (or the model's next prompt) knows what to remove.
Dynamic checks (profiler, tripwires, clocks, threads) run in the sandbox; see `verifier.workers.harness`. The
registry of every rule and the presets that refuse it is `verifier.policy.rules`; this package only finds.

* `python_rules`: one AST pass over the candidate's Python (its state in `pass_state`, the rules over
  names and attribute chains in `name_rules`);
* `cpp`: the embedded native sources and linker flags;
* `names`: the name tables both judge by; `violation`: the finding record.
"""

from __future__ import annotations

import ast

from verifier.policy.rules import RULE_HELP
from verifier.policy.static_scan.cpp import _embedded_sources, _vendor_ldflags, scan_cpp, strip_cpp_comments
from verifier.policy.static_scan.python_rules import PythonPass
from verifier.policy.static_scan.violation import Violation

RULES = RULE_HELP  # every rule's one-line help: verifier.policy.rules is the registry

__all__ = ["RULES", "Violation", "scan", "scan_cpp", "strip_cpp_comments"]


def scan(source: str, backend: str = "cpu") -> list[Violation]:
    """All static violations, sorted by line; an empty list means the gate's static part passes."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [Violation("syntax", exc.lineno or 0, f"{exc.msg}")]
    state = PythonPass(backend).run(tree)
    violations = list(state.violations)
    if not state.has_modelnew:
        violations.append(Violation("no-modelnew", 1, "define class ModelNew(nn.Module) with the same __init__ arguments as Model"))
    for line, code in _embedded_sources(tree):
        violations.extend(scan_cpp(line, code))
    violations.extend(_vendor_ldflags(tree))
    unique: dict[tuple[str, int], Violation] = {}
    for v in violations:
        unique.setdefault((v.rule, v.line), v)
    return sorted(unique.values(), key=lambda v: (v.line, v.rule))
