"""What one AST pass over a candidate knows at each node: the aliases of torch and of the reference, the
class and method being read, the names bound in them, the module-level facts found before the pass, and
the violations found so far.

The pass (`python_rules.PythonPass`) and the name rules (`name_rules.NameRules`) are separate objects that
share this one record: the pass writes the positional facts as it walks (the stacks, the aliases, the
tensors tracked in forward), the rules only read them and add violations. Keeping it in one typed place
lets each of the two files be read alone."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from verifier.policy.static_scan.names import MUTABLE_FACTORIES, TORCH_ALLOCATIONS
from verifier.policy.static_scan.violation import Violation


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a chain of attributes on a name, None for anything else (a call, a subscript)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _setup_methods(cls: ast.ClassDef) -> set[str]:
    """Methods of `cls` called as self.NAME(...) from __init__ and from no other method (e.g. reset_parameters)."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}

    def called(fn: ast.AST) -> set[str]:
        return {c.func.attr for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and dotted(c.func.value) == "self" and c.func.attr in methods}

    init = methods.get("__init__")
    if init is None:
        return set()
    elsewhere = set().union(*(called(fn) for name, fn in methods.items() if name != "__init__"), set())
    return (called(init) - elsewhere) - {"forward", "__init__"}


@dataclass
class PassState:
    """The facts of one pass over one module (made fresh for each `scan`)."""

    backend: str
    violations: list[Violation] = field(default_factory=list)
    # names: `import torch as T` -> {"T": "torch"}; which of them are modules; what the module defines
    aliases: dict[str, str] = field(default_factory=dict)
    module_aliases: set[str] = field(default_factory=set)
    class_names: set[str] = field(default_factory=set)
    top_names: set[str] = field(default_factory=set)
    global_mutable: set[str] = field(default_factory=set)
    # the custom extension: module-level names bound to load_inline, self attributes holding it or a layer
    ext_names: set[str] = field(default_factory=set)
    self_ext: set[str] = field(default_factory=set)
    self_layers: dict[str, str] = field(default_factory=dict)
    # where the pass is: enclosing classes and functions, their local names and nested definitions
    class_stack: list[str] = field(default_factory=list)
    func_stack: list[str] = field(default_factory=list)
    local_stack: list[set[str]] = field(default_factory=list)
    def_stack: list[set[str]] = field(default_factory=list)
    tensor_names: set[str] = field(default_factory=set)
    has_modelnew: bool = False
    parents: dict[int, ast.AST] = field(default_factory=dict)
    setup_methods: dict[str, set[str]] = field(default_factory=dict)
    allowed_modules: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.backend == "triton":
            self.allowed_modules = {"triton", "triton.language", "tl"}

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), message))

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name `node` stands for once the module's aliases are followed (`T.relu` -> `torch.relu`)."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            full = self.aliases[head]
            return f"{full}.{rest}" if rest else full
        return name

    def in_setup(self) -> bool:
        """Inside an `__init__`, a helper defined in one, or a method only `__init__` calls (`reset_parameters`):
        set-up, not the work, so torch calls are allowed."""
        if "__init__" in self.func_stack:
            return True
        return bool(self.class_stack and self.func_stack) and \
            self.func_stack[0] in self.setup_methods.get(self.class_stack[-1], set())

    def in_forward(self) -> bool:
        """Inside a method of a class the candidate defines (ModelNew, its bases, its sub-modules), other than
        `__init__`: the code that runs on every call."""
        return bool(self.class_stack) and bool(self.func_stack) and not self.in_setup()

    def is_local(self, name: str) -> bool:
        return bool(self.local_stack) and name in self.local_stack[-1]

    def is_tensor(self, node: ast.AST) -> bool:
        """A name bound in forward to an input, a custom-kernel result or a view of one."""
        return isinstance(node, ast.Name) and node.id in self.tensor_names

    def prepare(self, tree: ast.Module) -> None:
        """Module-level facts the rules need before the pass: parents, class names, mutable globals."""
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.ClassDef):
                self.class_names.add(node.name)
                self.setup_methods[node.name] = _setup_methods(node)
        for node in tree.body:
            targets: list[ast.expr] = []
            value = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.top_names.add(node.name)
            for t in targets:
                for name in (n.id for n in ast.walk(t) if isinstance(n, ast.Name)):
                    self.top_names.add(name)
                    if value is not None and self.is_mutable_value(value):
                        self.global_mutable.add(name)

    def is_mutable_value(self, value: ast.AST) -> bool:
        """A value that can keep state across calls: a container (not a list of constants), a mutable
        factory's result, an instance of a class the module defines, a torch allocation."""
        if isinstance(value, ast.List | ast.Set) and value.elts and all(isinstance(e, ast.Constant) for e in value.elts):
            return False  # a list of constants (dims, flags): only changing it in forward is state, see visit_Call
        if isinstance(value, ast.Dict | ast.List | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
            return True
        if isinstance(value, ast.Call):
            name = dotted(value.func) or ""
            leaf = name.split(".")[-1]
            if name in MUTABLE_FACTORIES or leaf in MUTABLE_FACTORIES - {"list", "dict", "set"} or name in self.class_names:
                return True
            return name.split(".")[0] in {"torch"} and leaf in TORCH_ALLOCATIONS
        return False
