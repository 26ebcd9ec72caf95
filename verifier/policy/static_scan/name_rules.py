"""The rules over the names a candidate's Python reaches: a bare name (the reference `Model`, a
module used as a value, module-level state read in forward), an attribute chain however it is spelled
(`os.path.os.system`, `[torch.utils][0].cpp_extension`, getattr with a constant), and a torch name
(compilers, side streams and CUDA graphs, torch ops doing the work).

`NameRules` is a collaborator of the pass (`verifier.policy.static_scan.python_rules.PythonPass`): the
pass calls `check_name`/`check_attribute` on each such node and the `check_*` methods where a call or an
import names something; the rules read where the pass is (aliases, the class and method being read) from
the shared `PassState` and add violations to it, and never walk the tree themselves."""

from __future__ import annotations

import ast

from verifier.policy.static_scan.cpp import TORCH_CUDA_GRAPHS, TORCH_CUDA_STREAMS
from verifier.policy.static_scan.names import (
    ALLOWED_TORCH,
    ALLOWED_TORCH_PREFIXES,
    COMPILER_TORCH,
    DESERIALIZATION_ATTRS,
    DESERIALIZATION_NAMES,
    INTROSPECTION_ATTRS,
    KNOWN_MODULES,
    MODULE_HOOKS,
    NN_LAYER_PREFIX,
    OS_ALLOWED,
    REACHABLE_MODULES,
    TENSOR_SUBCLASS_NAMES,
    TENSOR_SUBCLASS_TORCH,
)
from verifier.policy.static_scan.pass_state import PassState, dotted


class NameRules:
    """Name and attribute rules of the AST pass, over the pass's `state`."""

    def __init__(self, state: PassState):
        self.state = state

    def check_name(self, node: ast.Name) -> None:
        if node.id == "Model" and isinstance(node.ctx, ast.Load):
            self.state.add("reference-model", node, "the reference Model is referenced")
        if node.id in {"__builtins__", "__loader__", "__spec__"}:
            self.state.add("introspection", node, f"{node.id} is not allowed")
        if node.id in TENSOR_SUBCLASS_NAMES:
            self.state.add("tensor-subclass", node, f"{node.id}: outputs must be plain tensors")
        if isinstance(node.ctx, ast.Load):
            self._check_module_value(node)
            if self.state.in_forward() and node.id in self.state.global_mutable and not self.state.is_local(node.id):
                self.state.add("output-cache", node, f"forward uses module-level {node.id}, which can keep state across calls")

    def _check_module_value(self, node: ast.Name) -> None:
        """A module used as a value (passed, stored, returned) hides which of its functions get called."""
        if node.id not in self.state.module_aliases:
            return
        parent = self.state.parents.get(id(node))
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return
        if isinstance(parent, ast.Assign | ast.NamedExpr | ast.AnnAssign) and getattr(parent, "value", None) is node:
            return  # an alias: `_T = torch`; later uses resolve through it
        if isinstance(parent, ast.Tuple | ast.List) and isinstance(self.state.parents.get(id(parent)), ast.Assign):
            return  # `a, b = torch, os`, resolved pairwise
        if isinstance(parent, ast.Call) and dotted(parent.func) in {"getattr", "hasattr", "isinstance"} and \
                parent.args and parent.args[0] is node:
            return  # getattr(torch, "name") is checked by name
        if isinstance(parent, ast.Import | ast.ImportFrom | ast.alias):
            return
        self.state.add("indirection", node, f"the module {self.state.aliases.get(node.id, node.id)} is used as a value; "
                                      "call its functions by name")

    def check_attribute(self, node: ast.Attribute) -> None:
        full = self.state.resolve(node) or ""
        self.check_name_chain(node, full, node.attr, dotted(node.value) == "self")
        if not full and not isinstance(self.state.parents.get(id(node)), ast.Attribute):
            # `[torch.utils][0].cpp_extension.importlib`, `(lambda: torch)().os`: the chain passes through
            # a subscript, a call or an expression; every name it may stand for is checked like a dotted one
            for chain in self._loose_chains(node):
                if "." in chain and chain != full:
                    self.check_name_chain(node, chain, chain.rsplit(".", 1)[1])
                    self.check_torch_name(node, chain)

    def _loose_chains(self, node: ast.AST, depth: int = 0) -> list[str]:
        """The dotted names an expression may evaluate to, looking through container literals and their
        subscripts, calls (their callee, getattr/vars by their object), conditionals, walrus and lambdas."""
        if depth > 12:
            return []
        sub = lambda n: self._loose_chains(n, depth + 1)  # noqa: E731
        if isinstance(node, ast.Name):
            return [self.state.resolve(node) or node.id]
        if isinstance(node, ast.Attribute):
            return [f"{c}.{node.attr}" for c in sub(node.value)]
        if isinstance(node, ast.Subscript):
            return sub(node.value)
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            return [c for e in node.elts for c in sub(e)]
        if isinstance(node, ast.Dict):
            return [c for e in node.values if e is not None for c in sub(e)]
        if isinstance(node, ast.Starred | ast.NamedExpr):
            return sub(node.value)
        if isinstance(node, ast.IfExp):
            return sub(node.body) + sub(node.orelse)
        if isinstance(node, ast.BoolOp):
            return [c for v in node.values for c in sub(v)]
        if isinstance(node, ast.Lambda):
            return sub(node.body)
        if isinstance(node, ast.Call):
            fname = dotted(node.func)
            if fname in {"getattr", "vars", "dict", "list", "tuple", "next", "iter", "type"} and node.args:
                inner = sub(node.args[0])
                if fname == "getattr" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    return [f"{c}.{str(node.args[1].value)}" for c in inner]
                return inner
            return sub(node.func)
        if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return sub(node.elt) + [c for g in node.generators for c in sub(g.iter)]
        return []

    def check_name_chain(self, node: ast.AST, full: str, attr: str, on_self: bool = False) -> None:
        """Rules on a dotted name (`os.path.os.system`, `sys.modules`, `torch._C`), reached by attribute access
        or by getattr with a constant name."""
        parts = full.split(".")
        if parts[0] == "os" and len(parts) > 1 and parts[1] not in OS_ALLOWED:
            self.state.add("os-escape", node, f"os.{parts[1]} is not allowed: only os.environ and os.path may be used")
        for i, part in enumerate(parts[1:], 1):
            if part in REACHABLE_MODULES and not (i == 1 and parts[0] == "os" and part == "path") and \
                    (parts[0] in self.state.module_aliases or parts[0] in KNOWN_MODULES or parts[0] in self.state.aliases):
                rule = "os-escape" if part == "os" else "indirection"
                self.state.add(rule, node, f"{'.'.join(parts[:i + 1])} reaches the {part} module through another module")
                break
        self.check_deserialization(node, full, attr)
        if attr in INTROSPECTION_ATTRS and not (on_self and attr == "modules"):
            self.state.add("introspection", node, f".{attr} is not allowed in a candidate")
        if attr in TENSOR_SUBCLASS_NAMES or full.startswith(TENSOR_SUBCLASS_TORCH):
            self.state.add("tensor-subclass", node, f"{full or attr}: outputs must be plain tensors, without "
                                              "__torch_function__ or subclass wrappers")
        if attr in MODULE_HOOKS:
            self.state.add("forward-outside-class", node, f".{attr}() runs code around forward; do the work in forward")
        if self._check_gpu_name(node, full):
            pass
        elif full.startswith(COMPILER_TORCH):
            self.state.add("compiler-standin", node, f"{full}: compilers and torch internals cannot stand in for the kernel")

    def check_deserialization(self, node: ast.AST, full: str, attr: str) -> None:
        name = full.replace("np.", "numpy.", 1) if full.startswith("np.") and "np" not in self.state.aliases else full
        if any(name == p or name.startswith(p + ".") for p in DESERIALIZATION_NAMES) or attr in DESERIALIZATION_ATTRS:
            self.state.add("deserialization", node, f"{full or attr}: loading pickles or files is not allowed in a candidate "
                                              "(it can run code and forge what the verifier records); compute with "
                                              "the inputs and weights forward receives")

    def _check_gpu_name(self, node: ast.AST, name: str) -> bool:
        """Streams, events and CUDA graphs: ways to hide work from the timed stream or replay outputs."""
        if name.startswith(TORCH_CUDA_GRAPHS):
            self.state.add("cuda-graph", node, f"{name}: CUDA graph replay can return captured outputs; launch the kernel")
            return True
        if name.startswith(TORCH_CUDA_STREAMS):
            self.state.add("gpu-stream", node, f"{name}: launch on the current stream; side streams and events are not allowed")
            return True
        return False

    def check_torch_name(self, node: ast.AST, name: str) -> None:
        if not name.startswith("torch") or self._check_gpu_name(node, name):
            return
        if name.startswith(COMPILER_TORCH):
            self.state.add("compiler-standin", node, f"{name}: compilers cannot stand in for the kernel")
            return
        if name.startswith(ALLOWED_TORCH_PREFIXES) or name.startswith(TENSOR_SUBCLASS_TORCH):
            return
        if self.state.in_setup():
            return  # __init__ is set-up (parameters, masks, weight layouts), not the work
        parts = name.split(".")
        if len(parts) == 2 and parts[1] in ALLOWED_TORCH:
            return
        if name.startswith(NN_LAYER_PREFIX) and len(parts) == 3 and parts[2][:1].isupper():
            if self.state.in_forward():
                self.state.add("torch-op", node, f"{name} built inside forward runs torch's kernel")
            return
        if name.startswith("torch.cuda.") and parts[2] in {"current_stream", "default_stream", "synchronize"}:
            return
        self.state.add("torch-op", node, f"{name} does the work in torch; compute it in the custom kernel")
