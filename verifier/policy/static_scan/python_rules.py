"""The rules over the candidate's Python: one AST pass (`_Scanner`) that names each torch call, alias,
indirection, patch, cache, thread and escape, with the line it is on.

It is one visitor whose methods share the state of the pass (aliases of torch and of the reference, the
class being read, set-up methods, containers made in them). The rules over names and attribute chains
are a mixin of their own (`verifier.policy.static_scan.name_rules`) that reads that state through `self`; the
pass, its imports, definitions, assignments, tensor tracking and calls stay here."""

from __future__ import annotations

import ast

from verifier.policy.static_scan.name_rules import NameRules, _dotted
from verifier.policy.static_scan.names import (
    ALLOWED_TORCH,
    ALLOWED_TORCH_PREFIXES,
    ARITHMETIC_DUNDERS,
    COMPILER_MODULES,
    COMPILER_TORCH,
    COMPUTE_METHODS,
    CONCURRENCY_MODULES,
    CONTAINER_MUTATORS,
    DESERIALIZATION_KEYWORDS,
    INDIRECTION_CALLS,
    INDIRECTION_MODULES,
    INTROSPECTION_ATTRS,
    INTROSPECTION_MODULES,
    KNOWN_MODULES,
    MUTABLE_FACTORIES,
    NN_LAYER_PREFIX,
    OS_ALLOWED,
    PATCHABLE_ROOTS,
    TENSOR_BASES,
    TENSOR_METHODS_OK,
    TENSOR_SUBCLASS_NAMES,
    TENSOR_SUBCLASS_TORCH,
    TENSOR_VIEWS,
    TORCH_ALLOCATIONS,
)
from verifier.policy.static_scan.violation import Violation


def _setup_methods(cls: ast.ClassDef) -> set[str]:
    """Methods of `cls` called as self.NAME(...) from __init__ and from no other method (e.g. reset_parameters)."""
    methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}

    def called(fn: ast.AST) -> set[str]:
        return {c.func.attr for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                and _dotted(c.func.value) == "self" and c.func.attr in methods}

    init = methods.get("__init__")
    if init is None:
        return set()
    elsewhere = set().union(*(called(fn) for name, fn in methods.items() if name != "__init__"), set())
    return (called(init) - elsewhere) - {"forward", "__init__"}


class _Scanner(NameRules, ast.NodeVisitor):
    """One pass over the module; collects violations with line numbers."""

    def __init__(self, backend: str):
        self.backend = backend
        self.aliases: dict[str, str] = {}
        self.violations: list[Violation] = []
        self.ext_names: set[str] = set()
        self.self_ext: set[str] = set()
        self.self_layers: dict[str, str] = {}
        self.func_stack: list[str] = []
        self.tensor_names: set[str] = set()
        self.class_stack: list[str] = []
        self.has_modelnew = False
        self.module_aliases: set[str] = set()
        self.class_names: set[str] = set()
        self.top_names: set[str] = set()
        self.global_mutable: set[str] = set()
        self.local_stack: list[set[str]] = []
        self.def_stack: list[set[str]] = []
        self.parents: dict[int, ast.AST] = {}
        self.setup_methods: dict[str, set[str]] = {}
        self.allowed_modules = {"triton", "triton.language", "tl"} if backend == "triton" else set()

    def add(self, rule: str, node: ast.AST, message: str) -> None:
        self.violations.append(Violation(rule, getattr(node, "lineno", 0), message))

    # names --------------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        name = _dotted(node)
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

    def prepare(self, tree: ast.Module) -> None:
        """Module-level facts the rules need before the pass: parents, class names, mutable globals."""
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[id(child)] = node
            if isinstance(node, ast.ClassDef):
                self.class_names.add(node.name)
                self.setup_methods[node.name] = _setup_methods(node)
        for node in tree.body:
            targets: list[ast.AST] = []
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
                    if value is not None and self._is_mutable_value(value):
                        self.global_mutable.add(name)

    def _is_mutable_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.List | ast.Set) and value.elts and all(isinstance(e, ast.Constant) for e in value.elts):
            return False  # a list of constants (dims, flags): only changing it in forward is state, see visit_Call
        if isinstance(value, ast.Dict | ast.List | ast.Set | ast.ListComp | ast.DictComp | ast.SetComp):
            return True
        if isinstance(value, ast.Call):
            name = _dotted(value.func) or ""
            leaf = name.split(".")[-1]
            if name in MUTABLE_FACTORIES or leaf in MUTABLE_FACTORIES - {"list", "dict", "set"} or name in self.class_names:
                return True
            return name.split(".")[0] in {"torch"} and leaf in TORCH_ALLOCATIONS
        return False

    # imports ------------------------------------------------------------------------------------
    def _check_module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if module in self.allowed_modules or root in self.allowed_modules:
            return
        if root == "triton" and self.backend != "triton":
            self.add("compiler-standin", node, "triton is only allowed with --backend triton")
        elif root in COMPILER_MODULES:
            self.add("compiler-standin", node, f"import of {module}: the work must be done by the custom kernel")
        elif root in INDIRECTION_MODULES:
            self.add("indirection", node, f"import of {module} is not allowed in a candidate")
            self._check_deserialization(node, module, "")
        elif root in INTROSPECTION_MODULES:
            self.add("introspection", node, f"import of {module} is not allowed in a candidate")
        elif root in CONCURRENCY_MODULES and module not in {"os.path"}:
            self.add("concurrency", node, f"import of {module} is not allowed in a candidate")
        elif module.startswith(COMPILER_TORCH):
            self.add("compiler-standin", node, f"import of {module}: compilers cannot stand in for the kernel")
        elif root not in {"torch", "math", "typing", "__future__", "dataclasses", "collections", "triton", "os", "sys",
                          "time"}:
            self.add("indirection", node, f"import of {module}: only torch (and the backend's toolchain) may be imported")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            self.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            self.module_aliases.add(alias.asname or alias.name.split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add("reference-model", node, "relative imports can reach the reference task")
        self._check_module(node, module)
        for alias in node.names:
            if module == "os" and alias.name not in OS_ALLOWED:
                self.add("os-escape", node, f"os.{alias.name} is not allowed: only os.environ and os.path may be used")
            if alias.name == "Model":
                self.add("reference-model", node, f"imports Model from {module}")
            if alias.name == "*":
                self.add("indirection", node, f"`from {module} import *` hides what is called")
            if alias.name in INTROSPECTION_ATTRS:
                self.add("introspection", node, f"`from {module} import {alias.name}` is not allowed in a candidate")
            self.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            if f"{module}.{alias.name}" in KNOWN_MODULES:
                self.module_aliases.add(alias.asname or alias.name)
            if alias.name in TENSOR_SUBCLASS_NAMES or f"{module}.".startswith(tuple(p + "." for p in TENSOR_SUBCLASS_TORCH)):
                self.add("tensor-subclass", node, f"`from {module} import {alias.name}`: outputs must be plain tensors")
            if module:
                self._check_module(node, f"{module}.{alias.name}")
        self.generic_visit(node)

    # structure ----------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            self.has_modelnew = True
            for base in node.bases:
                if _dotted(base) in {"Model"}:
                    self.add("reference-model", node, "ModelNew must not inherit from the reference Model")
        for base in node.bases:
            full = self.resolve(base) or ""
            if full.startswith(TENSOR_BASES) or full.startswith(TENSOR_SUBCLASS_TORCH):
                self.add("tensor-subclass", node, f"class {node.name}({full}): outputs must be plain torch.Tensor, "
                                                  "not a subclass that can compute later")
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else (
                [item.target] if isinstance(item, ast.AnnAssign | ast.AugAssign) else [])
            for t in targets:
                if isinstance(t, ast.Name) and t.id in {"forward", "__call__"}:
                    self.add("forward-outside-class", item, f"{t.id} = ... binds a function defined elsewhere; "
                                                            f"write def {t.id}(self, ...) in the class body")
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__call__":
                self.add("forward-outside-class", item, "overriding __call__ bypasses forward; define forward only")
        self.class_stack.append(node.name)
        self.generic_visit(node)
        self.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            name = self.resolve(dec.func if isinstance(dec, ast.Call) else dec) or ""
            if name.split(".")[-1] in {"lru_cache", "cache", "cached_property"}:
                self.add("output-cache", dec, f"@{name} caches results across calls")
            if name.startswith(COMPILER_TORCH):
                self.add("compiler-standin", dec, f"@{name}: compilers cannot stand in for the kernel")
        if node.name in {"__torch_function__", "__torch_dispatch__"}:
            self.add("tensor-subclass", node, f"{node.name} lets a tensor run code whenever torch touches it; "
                                              "return plain tensors")
        self.func_stack.append(node.name)
        outer = self.tensor_names
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        local = {a.arg for a in args}
        for a in (node.args.vararg, node.args.kwarg):
            if a is not None:
                local.add(a.arg)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                local.add(sub.id)
        self.local_stack.append(local)
        self.def_stack.append({n.name for n in ast.walk(node) if n is not node and
                               isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
                               and hasattr(n, "name")})
        if self.in_forward():
            self.tensor_names = {a.arg for a in args if a.arg != "self"}
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None and self._is_mutable_value(default):
                    self.add("output-cache", default, f"a mutable default argument of {node.name} keeps state across calls")
        self.generic_visit(node)
        self.local_stack.pop()
        self.def_stack.pop()
        self.tensor_names = outer
        self.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        self.add("try-fallback", node, "try/except is not allowed: a kernel must not fall back to torch on failure")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        if self.func_stack:
            self.add("output-cache", node, f"`global {', '.join(node.names)}` inside a function keeps state across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.add("output-cache", node, "`nonlocal` keeps state across calls")

    # assignments --------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Attribute):
            base = _dotted(target.value)
            full = self.resolve(target.value) or ""
            root = (base or "").split(".")[0]
            if base in self.class_names and not self.in_forward():
                self.add("forward-outside-class", target, f"assigns {base}.{target.attr} outside the class body; "
                                                          "define methods with def inside the class")
            elif self.in_forward() and root and root != "self" and root in self.top_names and not self.is_local(root):
                self.add("output-cache", target, f"forward assigns {base}.{target.attr}: module-level state kept across calls")
            if base == "self":
                if self.in_forward():
                    self.add("output-cache", target, f"forward assigns self.{target.attr}: state kept across calls can replay outputs")
                elif value is not None and self.in_setup() and self._stores_function(value):
                    self.add("torch-op", target, f"self.{target.attr} holds a function for forward to call; "
                                                 "write the work in forward with the custom kernel")
                elif value is not None:
                    vname = self.resolve(value.func) if isinstance(value, ast.Call) else self.resolve(value)
                    if vname and vname in self.ext_names:
                        self.self_ext.add(target.attr)
                    elif vname and vname.startswith(NN_LAYER_PREFIX) and not vname.startswith(
                        ("torch.nn.Parameter", "torch.nn.ParameterList")
                    ):
                        self.self_layers[target.attr] = vname
            elif full.split(".")[0] in PATCHABLE_ROOTS or (base or "").split(".")[0] in PATCHABLE_ROOTS:
                self.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching modules is not allowed")
            elif base and base in self.aliases:
                self.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching imported modules is not allowed")
        elif isinstance(target, ast.Subscript):
            base = _dotted(target.value) or ""
            if self.in_forward() and base and not base.startswith("self"):
                self.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
            if base.startswith("self") and self.in_forward():
                self.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, None)
        elif isinstance(target, ast.Name) and not self.func_stack and value is not None and isinstance(value, ast.Call):
            fname = self.resolve(value.func) or ""
            if fname.endswith(("load_inline", "cpp_extension.load")) or fname in {"load_inline", "load"}:
                self.ext_names.add(target.id)
        if isinstance(target, ast.Name) and target.id in {"Model"}:
            self.add("reference-model", target, "rebinding the name Model is not allowed")

    def _stores_function(self, value: ast.AST) -> bool:
        """A lambda, a function defined in __init__, or a torch function (not a call) stored on self."""
        if isinstance(value, ast.Lambda):
            return True
        if isinstance(value, ast.Name) and self.def_stack and value.id in self.def_stack[-1]:
            return True
        name = self.resolve(value) if isinstance(value, ast.Attribute | ast.Name) else None
        if not name or not name.startswith("torch."):
            return False
        parts = name.split(".")
        if name.startswith(ALLOWED_TORCH_PREFIXES) or (len(parts) == 2 and parts[1] in ALLOWED_TORCH):
            return False
        return not (name.startswith(NN_LAYER_PREFIX) and parts[-1][:1].isupper())

    def _alias(self, target: ast.AST, value: ast.AST) -> None:
        """`_T = torch`, `F = torch.nn.functional`, `relu = torch.relu`: later uses resolve through the alias."""
        if isinstance(target, ast.Tuple | ast.List) and isinstance(value, ast.Tuple | ast.List) and \
                len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                self._alias(t, v)
            return
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Name | ast.Attribute):
            return
        head = (_dotted(value) or "").split(".")[0]
        if head in self.aliases:
            full = self.resolve(value) or ""
            self.aliases[target.id] = full
            if isinstance(value, ast.Name) and value.id in self.module_aliases or full in KNOWN_MODULES:
                self.module_aliases.add(target.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            self._check_target(t, node.value)
            self._track_tensor(t, node.value)
            self._alias(t, node.value)
        self.generic_visit(node)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self._alias(node.target, node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_target(node.target, None)
        if self.in_forward() and (self._is_tensor(node.target) or self._is_tensor(node.value)):
            self.add("tensor-arithmetic", node, "in-place arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Attribute) and (self.resolve(t.value) or "").split(".")[0] in PATCHABLE_ROOTS:
                self.add("monkey-patch", t, "deleting module attributes is not allowed")
        self.generic_visit(node)

    def _is_tensor(self, node: ast.AST) -> bool:
        """A name bound in forward to an input, a custom-kernel result or a view of one."""
        return isinstance(node, ast.Name) and node.id in self.tensor_names

    def _track_tensor(self, target: ast.AST, value: ast.AST | None) -> None:
        if not self.in_forward() or not isinstance(target, ast.Name) or value is None:
            return
        tensor = self._is_tensor(value)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            base = _dotted(value.func.value) or ""
            ext = base in self.ext_names or (base.startswith("self.") and base[5:] in self.self_ext)
            view = self._is_tensor(value.func.value) and value.func.attr in TENSOR_VIEWS
            alloc = (self.resolve(value.func) or "").split(".")[-1] in {"empty", "empty_like", "zeros", "zeros_like"}
            tensor = ext or view or alloc
        (self.tensor_names.add if tensor else self.tensor_names.discard)(target.id)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.in_setup():
            self.add("torch-op", node, "the @ operator runs torch's matmul")
        elif self.in_forward() and (self._is_tensor(node.left) or self._is_tensor(node.right)):
            self.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator; "
                                                "do it in the custom kernel")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if self.in_forward() and any(self._is_tensor(n) for n in [node.left, *node.comparators]):
            self.add("tensor-arithmetic", node, "comparing tensors in forward runs a torch operator; do it in the kernel")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if self.in_forward() and not isinstance(node.op, ast.Not) and self._is_tensor(node.operand):
            self.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.resolve(func)
        for kw in node.keywords:
            if kw.arg and isinstance(kw.value, ast.Constant) and (kw.arg, kw.value.value) in DESERIALIZATION_KEYWORDS:
                self.add("deserialization", node, f"{kw.arg}={kw.value.value!r} unpickles or maps data from a file; "
                                                  "not allowed in a candidate")
        if isinstance(func, ast.Name) and func.id in {"load", "loads", "from_file", "fromfile"} and \
                (self.aliases.get(func.id) or "").rpartition(".")[0]:
            self._check_deserialization(node, self.aliases[func.id], func.id)
        if isinstance(func, ast.Name):
            if func.id in INDIRECTION_CALLS:
                self.add("indirection", node, f"{func.id}() is not allowed in a candidate")
            if func.id == "getattr" and (len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                self.add("indirection", node, "getattr with a computed name can hide torch calls")
            if func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                target = self.resolve(node.args[0]) or ""
                attr = str(node.args[1].value)
                self._check_name_chain(node, f"{target}.{attr}", attr, _dotted(node.args[0]) == "self")
                self._check_torch_name(node, f"{target}.{attr}")
            if func.id == "Model":
                self.add("reference-model", node, "instantiates the reference Model")
        if name:
            self._check_torch_name(node, name)
            head, _, leaf = name.rpartition(".")
            if head == "sys" and leaf in {"exit", "settrace", "setprofile", "_getframe", "addaudithook"}:
                self.add("introspection", node, f"sys.{leaf}() is not allowed in a candidate")
        if isinstance(func, ast.Attribute) and self.in_forward() and isinstance(func.value, ast.Name) and \
                func.value.id in self.top_names and not self.is_local(func.value.id) and func.attr in CONTAINER_MUTATORS:
            self.add("output-cache", node, f"forward changes module-level {func.value.id} with .{func.attr}(): "
                                           "state kept across calls")
        if isinstance(func, ast.Attribute) and self.in_forward() and func.attr in ARITHMETIC_DUNDERS:
            self.add("tensor-arithmetic", node, f".{func.attr}() is tensor arithmetic; do it in the custom kernel")
        if isinstance(func, ast.Attribute) and self.in_forward():
            base = _dotted(func.value) or ""
            ext_call = base in self.ext_names or (base.startswith("self.") and base[5:] in self.self_ext)
            if base.startswith("self.") and base[5:] in self.self_ext:
                ext_call = True
            if not ext_call and func.attr in COMPUTE_METHODS and not (name or "").startswith(("math.", "triton", "tl.")):
                self.add("torch-op", node, f".{func.attr}() runs a torch operator; compute it in the custom kernel")
            elif self._is_tensor(func.value) and func.attr not in TENSOR_METHODS_OK | ARITHMETIC_DUNDERS:
                self.add("torch-op", node, f".{func.attr}() on a tensor runs a torch operator; only views, metadata "
                                           "and allocation may be called on tensors in forward")
        if isinstance(func, ast.Attribute) and _dotted(func.value) == "self" and self.in_forward():
            layer = self.self_layers.get(func.attr)
            if layer:
                self.add("torch-op", node, f"calling self.{func.attr} ({layer}) runs torch's kernel, not a custom one")
        self.generic_visit(node)
