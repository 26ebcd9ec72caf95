"""The layering of docs/ARCHITECTURE.md as a contract: evokernel_tui -> core -> (memory | verifier).

import-linter checks the contract in pyproject.toml on every test run, and the same contract is shown
to fail on a small tree that breaks it (so this test cannot pass whatever the code does).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def _lint(cwd: Path, config: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT, "--config", str(config), "--no-cache"], cwd=cwd,
                          env={"PYTHONPATH": str(pythonpath), "PATH": "/usr/bin:/bin"}, capture_output=True,
                          text=True, timeout=120)


def _contract() -> dict:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert cfg["contracts"], "pyproject.toml has no import-linter contract"
    return cfg


def test_layering_contract_is_kept():
    out = _lint(REPO, REPO / "pyproject.toml", REPO)
    assert "No module named 'importlinter'" not in out.stderr, "install the test extra: pip install -e '.[test]'"
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert f"{len(_contract()['contracts'])} kept, 0 broken" in out.stdout


def test_contract_catches_memory_importing_verifier_and_core_importing_the_app(tmp_path):
    cfg = _contract()
    for pkg, body in {"evokernel_tui": "import core\n", "core": "import memory\nimport evokernel_tui\n",
                      "memory": "from verifier import x\n", "verifier": "x = 1\n"}.items():
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(body)
    layers = ", ".join(f'"{layer}"' for layer in cfg["contracts"][0]["layers"])
    roots = ", ".join(f'"{r}"' for r in cfg["root_packages"])
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(f"""
        [tool.importlinter]
        root_packages = [{roots}]
        [[tool.importlinter.contracts]]
        name = "layers"
        type = "layers"
        layers = [{layers}]
    """))
    out = _lint(tmp_path, tmp_path / "pyproject.toml", tmp_path)
    assert out.returncode != 0, out.stdout
    assert "0 kept, 1 broken" in out.stdout
    assert "memory -> verifier" in out.stdout and "core -> evokernel_tui" in out.stdout


def test_forbidden_contract_catches_the_core_importing_textual(tmp_path):
    """The headless-core contract as configured (external packages included) fails a core that imports
    the terminal UI's toolkit."""
    cfg = _contract()
    forbidden = next(c for c in cfg["contracts"] if c["type"] == "forbidden")
    assert "textual" in forbidden["forbidden_modules"] and "core" in forbidden["source_modules"]
    for pkg, body in {"evokernel_tui": "import textual\n", "core": "from textual.app import App\n",
                      "memory": "x = 1\n", "verifier": "x = 1\n"}.items():
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(body)
    sources = ", ".join(f'"{m}"' for m in forbidden["source_modules"])
    banned = ", ".join(f'"{m}"' for m in forbidden["forbidden_modules"])
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(f"""
        [tool.importlinter]
        root_packages = ["evokernel_tui", "core", "memory", "verifier"]
        include_external_packages = true
        [[tool.importlinter.contracts]]
        name = "headless"
        type = "forbidden"
        source_modules = [{sources}]
        forbidden_modules = [{banned}]
    """))
    out = _lint(tmp_path, tmp_path / "pyproject.toml", tmp_path)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "0 kept, 1 broken" in out.stdout and "core -> textual" in out.stdout


def import_cycles(*packages: str) -> list[list[str]]:
    """Groups of modules that import each other, directly or round a loop (lazy imports included)."""
    import grimp

    graph = grimp.build_graph(*packages)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(start: str) -> None:  # Tarjan's strongly connected components, iteratively
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next((c for c in children if c in graph.modules), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycles_in_the_product():
    assert import_cycles("evokernel_tui", "core", "memory", "verifier") == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "loopy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from loopy import b\n")
    (pkg / "b.py").write_text("from loopy import a\n")
    (pkg / "c.py").write_text("from loopy import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("loopy") == [["loopy.a", "loopy.b"]]


def test_forbidden_contract_catches_the_app_importing_the_verifier(tmp_path):
    """The app-through-core contract as configured fails an app that imports the verifier, even lazily inside a
    function (the layers contract alone allows it: the verifier is below the app)."""
    cfg = _contract()
    through_core = next(c for c in cfg["contracts"]
                        if c["type"] == "forbidden" and c["source_modules"] == ["evokernel_tui"])
    assert set(through_core["forbidden_modules"]) == {"memory", "verifier"}
    for pkg, body in {"evokernel_tui": "import core\n\n\ndef show():\n    from verifier.result import x\n",
                      "core": "import verifier\n", "memory": "x = 1\n", "verifier": "x = 1\n"}.items():
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(body)
    (tmp_path / "verifier" / "result.py").write_text("x = 1\n")
    sources = ", ".join(f'"{m}"' for m in through_core["source_modules"])
    banned = ", ".join(f'"{m}"' for m in through_core["forbidden_modules"])
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(f"""
        [tool.importlinter]
        root_packages = ["evokernel_tui", "core", "memory", "verifier"]
        [[tool.importlinter.contracts]]
        name = "through core"
        type = "forbidden"
        source_modules = [{sources}]
        forbidden_modules = [{banned}]
        allow_indirect_imports = {str(through_core.get("allow_indirect_imports", False)).lower()}
    """))
    out = _lint(tmp_path, tmp_path / "pyproject.toml", tmp_path)
    assert out.returncode != 0, out.stdout + out.stderr
    assert "0 kept, 1 broken" in out.stdout and "evokernel_tui -> verifier.result" in out.stdout
