"""The rules over the candidate's Python: one AST pass (`PythonPass`) that names each torch call, alias,
indirection, patch, cache, thread and escape, with the line it is on.

Three objects with one job each: `PassState` (`pass_state`) is what the pass knows at a node (aliases of
torch and of the reference, the class being read, set-up methods, tensors tracked in forward) and the
violations found; `NameRules` (`name_rules`) judges names and attribute chains against that state;
`PythonPass` here walks the tree, keeps the state current and applies the rules over imports,
definitions, assignments and calls."""

from __future__ import annotations

import ast

from verifier.policy.static_scan.name_rules import NameRules
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
    NN_LAYER_PREFIX,
    OS_ALLOWED,
    PATCHABLE_ROOTS,
    TENSOR_BASES,
    TENSOR_METHODS_OK,
    TENSOR_SUBCLASS_NAMES,
    TENSOR_SUBCLASS_TORCH,
    TENSOR_VIEWS,
)
from verifier.policy.static_scan.pass_state import PassState, dotted


class PythonPass(ast.NodeVisitor):
    """One walk over the module: keeps `state` current at each node, applies the structural rules, and
    hands names and attribute chains to its `names` rules."""

    def __init__(self, backend: str):
        self.state = PassState(backend)
        self.names = NameRules(self.state)

    def run(self, tree: ast.Module) -> PassState:
        """Gather the module-level facts, walk the tree once; the state holds the violations found."""
        self.state.prepare(tree)
        self.visit(tree)
        return self.state

    # names: the rules are NameRules'; the pass only walks on ---------------------------------------
    def visit_Name(self, node: ast.Name) -> None:
        self.names.check_name(node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.names.check_attribute(node)
        self.generic_visit(node)

    # imports ------------------------------------------------------------------------------------
    def _check_module(self, node: ast.AST, module: str) -> None:
        root = module.split(".")[0]
        if module in self.state.allowed_modules or root in self.state.allowed_modules:
            return
        if root == "triton" and self.state.backend != "triton":
            self.state.add("compiler-standin", node, "triton is only allowed with --backend triton")
        elif root in COMPILER_MODULES:
            self.state.add("compiler-standin", node, f"import of {module}: the work must be done by the custom kernel")
        elif root in INDIRECTION_MODULES:
            self.state.add("indirection", node, f"import of {module} is not allowed in a candidate")
            self.names.check_deserialization(node, module, "")
        elif root in INTROSPECTION_MODULES:
            self.state.add("introspection", node, f"import of {module} is not allowed in a candidate")
        elif root in CONCURRENCY_MODULES and module not in {"os.path"}:
            self.state.add("concurrency", node, f"import of {module} is not allowed in a candidate")
        elif module.startswith(COMPILER_TORCH):
            self.state.add("compiler-standin", node, f"import of {module}: compilers cannot stand in for the kernel")
        elif root not in {"torch", "math", "typing", "__future__", "dataclasses", "collections", "triton", "os", "sys",
                          "time"}:
            self.state.add("indirection", node, f"import of {module}: only torch (and the backend's toolchain) may be imported")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._check_module(node, alias.name)
            self.state.aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
            self.state.module_aliases.add(alias.asname or alias.name.split(".")[0])
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.state.add("reference-model", node, "relative imports can reach the reference task")
        self._check_module(node, module)
        for alias in node.names:
            if module == "os" and alias.name not in OS_ALLOWED:
                self.state.add("os-escape", node, f"os.{alias.name} is not allowed: only os.environ and os.path may be used")
            if alias.name == "Model":
                self.state.add("reference-model", node, f"imports Model from {module}")
            if alias.name == "*":
                self.state.add("indirection", node, f"`from {module} import *` hides what is called")
            if alias.name in INTROSPECTION_ATTRS:
                self.state.add("introspection", node, f"`from {module} import {alias.name}` is not allowed in a candidate")
            self.state.aliases[alias.asname or alias.name] = f"{module}.{alias.name}" if module else alias.name
            if f"{module}.{alias.name}" in KNOWN_MODULES:
                self.state.module_aliases.add(alias.asname or alias.name)
            if alias.name in TENSOR_SUBCLASS_NAMES or f"{module}.".startswith(tuple(p + "." for p in TENSOR_SUBCLASS_TORCH)):
                self.state.add("tensor-subclass", node, f"`from {module} import {alias.name}`: outputs must be plain tensors")
            if module:
                self._check_module(node, f"{module}.{alias.name}")
        self.generic_visit(node)

    # structure ----------------------------------------------------------------------------------
    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node.name == "ModelNew":
            self.state.has_modelnew = True
            for base in node.bases:
                if dotted(base) in {"Model"}:
                    self.state.add("reference-model", node, "ModelNew must not inherit from the reference Model")
        for base in node.bases:
            full = self.state.resolve(base) or ""
            if full.startswith(TENSOR_BASES) or full.startswith(TENSOR_SUBCLASS_TORCH):
                self.state.add("tensor-subclass", node, f"class {node.name}({full}): outputs must be plain torch.Tensor, "
                                                  "not a subclass that can compute later")
        for item in node.body:
            targets = item.targets if isinstance(item, ast.Assign) else (
                [item.target] if isinstance(item, ast.AnnAssign | ast.AugAssign) else [])
            for t in targets:
                if isinstance(t, ast.Name) and t.id in {"forward", "__call__"}:
                    self.state.add("forward-outside-class", item, f"{t.id} = ... binds a function defined elsewhere; "
                                                            f"write def {t.id}(self, ...) in the class body")
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == "__call__":
                self.state.add("forward-outside-class", item, "overriding __call__ bypasses forward; define forward only")
        self.state.class_stack.append(node.name)
        self.generic_visit(node)
        self.state.class_stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for dec in node.decorator_list:
            name = self.state.resolve(dec.func if isinstance(dec, ast.Call) else dec) or ""
            if name.split(".")[-1] in {"lru_cache", "cache", "cached_property"}:
                self.state.add("output-cache", dec, f"@{name} caches results across calls")
            if name.startswith(COMPILER_TORCH):
                self.state.add("compiler-standin", dec, f"@{name}: compilers cannot stand in for the kernel")
        if node.name in {"__torch_function__", "__torch_dispatch__"}:
            self.state.add("tensor-subclass", node, f"{node.name} lets a tensor run code whenever torch touches it; "
                                              "return plain tensors")
        self.state.func_stack.append(node.name)
        outer = self.state.tensor_names
        args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        local = {a.arg for a in args}
        for a in (node.args.vararg, node.args.kwarg):
            if a is not None:
                local.add(a.arg)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                local.add(sub.id)
        self.state.local_stack.append(local)
        self.state.def_stack.append({n.name for n in ast.walk(node) if n is not node and
                               isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
                               and hasattr(n, "name")})
        if self.state.in_forward():
            self.state.tensor_names = {a.arg for a in args if a.arg != "self"}
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None and self.state.is_mutable_value(default):
                    self.state.add("output-cache", default, f"a mutable default argument of {node.name} keeps state across calls")
        self.generic_visit(node)
        self.state.local_stack.pop()
        self.state.def_stack.pop()
        self.state.tensor_names = outer
        self.state.func_stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        self.state.add("try-fallback", node, "try/except is not allowed: a kernel must not fall back to torch on failure")
        self.generic_visit(node)

    visit_TryStar = visit_Try  # type: ignore[assignment]

    def visit_Global(self, node: ast.Global) -> None:
        if self.state.func_stack:
            self.state.add("output-cache", node, f"`global {', '.join(node.names)}` inside a function keeps state across calls")

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.state.add("output-cache", node, "`nonlocal` keeps state across calls")

    # assignments --------------------------------------------------------------------------------
    def _check_target(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Attribute):
            base = dotted(target.value)
            full = self.state.resolve(target.value) or ""
            root = (base or "").split(".")[0]
            if base in self.state.class_names and not self.state.in_forward():
                self.state.add("forward-outside-class", target, f"assigns {base}.{target.attr} outside the class body; "
                                                          "define methods with def inside the class")
            elif self.state.in_forward() and root and root != "self" and root in self.state.top_names and not self.state.is_local(root):
                self.state.add("output-cache", target, f"forward assigns {base}.{target.attr}: module-level state kept across calls")
            if base == "self":
                if self.state.in_forward():
                    self.state.add("output-cache", target, f"forward assigns self.{target.attr}: state kept across calls can replay outputs")
                elif value is not None and self.state.in_setup() and self._stores_function(value):
                    self.state.add("torch-op", target, f"self.{target.attr} holds a function for forward to call; "
                                                 "write the work in forward with the custom kernel")
                elif value is not None:
                    vname = self.state.resolve(value.func) if isinstance(value, ast.Call) else self.state.resolve(value)
                    if vname and vname in self.state.ext_names:
                        self.state.self_ext.add(target.attr)
                    elif vname and vname.startswith(NN_LAYER_PREFIX) and not vname.startswith(
                        ("torch.nn.Parameter", "torch.nn.ParameterList")
                    ):
                        self.state.self_layers[target.attr] = vname
            elif full.split(".")[0] in PATCHABLE_ROOTS or (base or "").split(".")[0] in PATCHABLE_ROOTS:
                self.state.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching modules is not allowed")
            elif base and base in self.state.aliases:
                self.state.add("monkey-patch", target, f"assigns {base}.{target.attr}: patching imported modules is not allowed")
        elif isinstance(target, ast.Subscript):
            base = dotted(target.value) or ""
            if self.state.in_forward() and base and not base.startswith("self"):
                self.state.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
            if base.startswith("self") and self.state.in_forward():
                self.state.add("output-cache", target, f"forward writes into {base}[...]: state kept across calls")
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self._check_target(elt, None)
        elif isinstance(target, ast.Name) and not self.state.func_stack and value is not None and isinstance(value, ast.Call):
            fname = self.state.resolve(value.func) or ""
            if fname.endswith(("load_inline", "cpp_extension.load")) or fname in {"load_inline", "load"}:
                self.state.ext_names.add(target.id)
        if isinstance(target, ast.Name) and target.id in {"Model"}:
            self.state.add("reference-model", target, "rebinding the name Model is not allowed")

    def _stores_function(self, value: ast.AST) -> bool:
        """A lambda, a function defined in __init__, or a torch function (not a call) stored on self."""
        if isinstance(value, ast.Lambda):
            return True
        if isinstance(value, ast.Name) and self.state.def_stack and value.id in self.state.def_stack[-1]:
            return True
        name = self.state.resolve(value) if isinstance(value, ast.Attribute | ast.Name) else None
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
        head = (dotted(value) or "").split(".")[0]
        if head in self.state.aliases:
            full = self.state.resolve(value) or ""
            self.state.aliases[target.id] = full
            if isinstance(value, ast.Name) and value.id in self.state.module_aliases or full in KNOWN_MODULES:
                self.state.module_aliases.add(target.id)

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
        if self.state.in_forward() and (self.state.is_tensor(node.target) or self.state.is_tensor(node.value)):
            self.state.add("tensor-arithmetic", node, "in-place arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_target(node.target, node.value)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for t in node.targets:
            if isinstance(t, ast.Attribute) and (self.state.resolve(t.value) or "").split(".")[0] in PATCHABLE_ROOTS:
                self.state.add("monkey-patch", t, "deleting module attributes is not allowed")
        self.generic_visit(node)

    def _track_tensor(self, target: ast.AST, value: ast.AST | None) -> None:
        if not self.state.in_forward() or not isinstance(target, ast.Name) or value is None:
            return
        tensor = self.state.is_tensor(value)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            base = dotted(value.func.value) or ""
            ext = base in self.state.ext_names or (base.startswith("self.") and base[5:] in self.state.self_ext)
            view = self.state.is_tensor(value.func.value) and value.func.attr in TENSOR_VIEWS
            alloc = (self.state.resolve(value.func) or "").split(".")[-1] in {"empty", "empty_like", "zeros", "zeros_like"}
            tensor = ext or view or alloc
        (self.state.tensor_names.add if tensor else self.state.tensor_names.discard)(target.id)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.MatMult) and not self.state.in_setup():
            self.state.add("torch-op", node, "the @ operator runs torch's matmul")
        elif self.state.in_forward() and (self.state.is_tensor(node.left) or self.state.is_tensor(node.right)):
            self.state.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator; "
                                                "do it in the custom kernel")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        if self.state.in_forward() and any(self.state.is_tensor(n) for n in [node.left, *node.comparators]):
            self.state.add("tensor-arithmetic", node, "comparing tensors in forward runs a torch operator; do it in the kernel")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if self.state.in_forward() and not isinstance(node.op, ast.Not) and self.state.is_tensor(node.operand):
            self.state.add("tensor-arithmetic", node, "arithmetic on a tensor in forward runs a torch operator")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = self.state.resolve(func)
        for kw in node.keywords:
            if kw.arg and isinstance(kw.value, ast.Constant) and (kw.arg, kw.value.value) in DESERIALIZATION_KEYWORDS:
                self.state.add("deserialization", node, f"{kw.arg}={kw.value.value!r} unpickles or maps data from a file; "
                                                  "not allowed in a candidate")
        if isinstance(func, ast.Name) and func.id in {"load", "loads", "from_file", "fromfile"} and \
                (self.state.aliases.get(func.id) or "").rpartition(".")[0]:
            self.names.check_deserialization(node, self.state.aliases[func.id], func.id)
        if isinstance(func, ast.Name):
            if func.id in INDIRECTION_CALLS:
                self.state.add("indirection", node, f"{func.id}() is not allowed in a candidate")
            if func.id == "getattr" and (len(node.args) < 2 or not isinstance(node.args[1], ast.Constant)):
                self.state.add("indirection", node, "getattr with a computed name can hide torch calls")
            if func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                target = self.state.resolve(node.args[0]) or ""
                attr = str(node.args[1].value)
                self.names.check_name_chain(node, f"{target}.{attr}", attr, dotted(node.args[0]) == "self")
                self.names.check_torch_name(node, f"{target}.{attr}")
            if func.id == "Model":
                self.state.add("reference-model", node, "instantiates the reference Model")
        if name:
            self.names.check_torch_name(node, name)
            head, _, leaf = name.rpartition(".")
            if head == "sys" and leaf in {"exit", "settrace", "setprofile", "_getframe", "addaudithook"}:
                self.state.add("introspection", node, f"sys.{leaf}() is not allowed in a candidate")
        if isinstance(func, ast.Attribute) and self.state.in_forward() and isinstance(func.value, ast.Name) and \
                func.value.id in self.state.top_names and not self.state.is_local(func.value.id) and func.attr in CONTAINER_MUTATORS:
            self.state.add("output-cache", node, f"forward changes module-level {func.value.id} with .{func.attr}(): "
                                           "state kept across calls")
        if isinstance(func, ast.Attribute) and self.state.in_forward() and func.attr in ARITHMETIC_DUNDERS:
            self.state.add("tensor-arithmetic", node, f".{func.attr}() is tensor arithmetic; do it in the custom kernel")
        if isinstance(func, ast.Attribute) and self.state.in_forward():
            base = dotted(func.value) or ""
            ext_call = base in self.state.ext_names or (base.startswith("self.") and base[5:] in self.state.self_ext)
            if base.startswith("self.") and base[5:] in self.state.self_ext:
                ext_call = True
            if not ext_call and func.attr in COMPUTE_METHODS and not (name or "").startswith(("math.", "triton", "tl.")):
                self.state.add("torch-op", node, f".{func.attr}() runs a torch operator; compute it in the custom kernel")
            elif self.state.is_tensor(func.value) and func.attr not in TENSOR_METHODS_OK | ARITHMETIC_DUNDERS:
                self.state.add("torch-op", node, f".{func.attr}() on a tensor runs a torch operator; only views, metadata "
                                           "and allocation may be called on tensors in forward")
        if isinstance(func, ast.Attribute) and dotted(func.value) == "self" and self.state.in_forward():
            layer = self.state.self_layers.get(func.attr)
            if layer:
                self.state.add("torch-op", node, f"calling self.{func.attr} ({layer}) runs torch's kernel, not a custom one")
        self.generic_visit(node)
