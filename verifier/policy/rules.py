"""The anti-hacking rule registry and its presets (the model: KernelBench's `kernel_static_checker.py`).

Every rule the verifier can raise, static or at run time, is registered here with a one-line help and
the presets that refuse it. Two presets:

* **kernelbench** (the default): KernelBench's default semantics. Torch compute ops, `nn` layers and
  vendor libraries may do part of the work beside a custom kernel (its commonest level-2 solution keeps
  the GEMM in cuBLAS and fuses the epilogue); those rules are *reported* in the verdict, with each library
  op's share of forward's time, not refused. Bypasses, timer patches, threads, lazy outputs, side streams,
  decoy kernels and everything the run-time defences catch stay refused.
* **strict**: all of the reference's compute in custom kernels (every rule refuses).

A `Policy` is a preset plus rules switched off for an experiment (`--allow RULE`); it is recorded in the
verdict, its cache key and bench.json. A rule raised somewhere but missing here refuses under every
preset: forgetting to register a rule can never let a candidate through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

KERNELBENCH, STRICT = "kernelbench", "strict"
PRESETS = (KERNELBENCH, STRICT)
DEFAULT_PRESET = KERNELBENCH
STATIC, RUN = "static", "run"


@dataclass(frozen=True)
class Rule:
    """One check: its name (as verdicts print it), when it runs, what it means, which presets refuse it."""

    name: str
    stage: str
    help: str
    refused_in: frozenset[str] = frozenset(PRESETS)

    def refused_by(self, preset: str) -> bool:
        return preset in self.refused_in


_BOTH = frozenset(PRESETS)
_STRICT_ONLY = frozenset({STRICT})

_DEFINITIONS: tuple[Rule, ...] = (
    # static: the candidate's Python and embedded C++, read without running it
    Rule("syntax", STATIC, "the candidate is not valid Python"),
    Rule("no-modelnew", STATIC, "the candidate must define class ModelNew(nn.Module)"),
    Rule("torch-op", STATIC, "a torch operator does (part of) the work instead of the custom kernel", _STRICT_ONLY),
    Rule("tensor-arithmetic", STATIC, "arithmetic on tensors in forward runs torch operators instead of the kernel",
         _STRICT_ONLY),
    Rule("indirection", STATIC, "dynamic code (exec/eval/importlib/getattr/base64) can hide torch calls"),
    Rule("reference-model", STATIC, "the reference Model must not be imported or instantiated"),
    Rule("try-fallback", STATIC, "try/except can fall back to torch when the kernel fails"),
    Rule("compiler-standin", STATIC, "a compiler or another library stands in for the kernel"),
    Rule("output-cache", STATIC, "state kept across forward calls can replay cached outputs"),
    Rule("monkey-patch", STATIC, "patching torch, comparison functions or clocks"),
    Rule("introspection", STATIC, "reading other objects through gc, frames or sys.modules"),
    Rule("concurrency", STATIC, "threads or processes can finish the work after forward returns"),
    Rule("os-escape", STATIC, "os functions other than os.environ and os.path can touch files and processes"),
    Rule("forward-outside-class", STATIC, "forward must be defined with def inside class ModelNew, not bound from "
         "elsewhere"),
    Rule("tensor-subclass", STATIC, "outputs must be plain tensors: Tensor subclasses and __torch_function__ can "
         "run code later"),
    Rule("deserialization", STATIC, "unpickling or mapping files (torch.load, pickle, marshal, np.load, from_file) "
         "runs code or brings in data the verifier did not hand over"),
    Rule("cpp-torch-op", STATIC, "the C++ code calls a torch/ATen operator for (part of) the work", _STRICT_ONLY),
    Rule("cpp-library", STATIC, "the C++ code calls a vendor library (BLAS, oneDNN, cuBLAS, cuDNN) for the work",
         _STRICT_ONLY),
    Rule("cpp-escape", STATIC, "the C++ code starts threads or processes, runs Python or touches files"),
    Rule("cpp-python-escape", STATIC, "the C++ code reaches Python internals (__globals__, __builtins__, imports, "
         "eval) through pybind11"),
    Rule("gpu-stream", STATIC, "side streams and events let GPU work run outside the timed stream"),
    Rule("cuda-graph", STATIC, "CUDA graph replay can return outputs captured earlier"),
    # run time: what the sandboxed run, the profiler and the trusted audits saw
    Rule("no-custom-kernel", RUN, "no custom kernel was built: ModelNew must call a kernel of its own"),
    Rule("custom-kernel-unused", RUN, "forward never called the custom kernel"),
    Rule("custom-kernel-skipped", RUN, "the custom kernel did not run on every forward"),
    Rule("decoy-kernel", RUN, "the custom kernel's result does not reach forward's output"),
    Rule("copy-kernel", RUN, "the custom kernel only copies its inputs while torch operators do the work"),
    Rule("reference-op-at-runtime", RUN, "the reference's dominant ATen op ran inside ModelNew.forward",
         _STRICT_ONLY),
    Rule("torch-work-outside-kernel", RUN, "torch operators around the custom kernel do most of the work",
         _STRICT_ONLY),
    Rule("vendor-kernel", RUN, "a vendor library kernel (cuBLAS, cuDNN) ran in forward", _STRICT_ONLY),
    Rule("binary-library", RUN, "a built object calls BLAS or ATen operators directly", _STRICT_ONLY),
    Rule("binary-import", RUN, "a loaded object imports process, file, socket, dynamic-loading or Python "
         "symbols, or cannot be audited"),
    Rule("anon-exec", RUN, "executable memory with no file behind it (code written at run time: a JIT, mmap or "
         "mprotect with PROT_EXEC) ran in the sandbox, out of the binary audit's sight", _STRICT_ONLY),
    Rule("hidden-exec", RUN, "executable memory made at run time was unmapped or made non-executable before the "
         "verifier could audit it (code run and dropped within a forward)"),
    Rule("kernel-not-mapped", RUN, "the candidate says its kernel ran, but no process of its sandbox has the "
         "built kernel mapped"),
    Rule("unsynchronised-work", RUN, "the output was not ready on the current stream when forward returned"),
    Rule("job-tamper", RUN, "the candidate changed the job directory while the verifier handed it inputs"),
    Rule("timed-output", RUN, "a timed call's outputs were wrong, missing or replaced"),
)

REGISTRY: dict[str, Rule] = {r.name: r for r in _DEFINITIONS}
#: name -> one-line help, the shape older callers read (`verifier.policy.static_scan.RULES`)
RULE_HELP: dict[str, str] = {r.name: r.help for r in _DEFINITIONS}


class PolicyError(ValueError):
    """An unknown preset or rule name; the message is one line saying what to use instead."""


@dataclass(frozen=True)
class Policy:
    """A preset and the rules switched off for an experiment."""

    preset: str = DEFAULT_PRESET
    allowed: tuple[str, ...] = field(default_factory=tuple)

    def refuses(self, rule: str) -> bool:
        if rule in self.allowed:
            return False
        known = REGISTRY.get(rule)
        return known is None or known.refused_by(self.preset)

    def to_dict(self) -> dict[str, object]:
        return {"preset": self.preset, "allowed": list(self.allowed)}

    def label(self) -> str:
        return self.preset + (f" (allowing {', '.join(self.allowed)})" if self.allowed else "")


def make_policy(preset: str | None = None, allow: list[str] | tuple[str, ...] | None = None) -> Policy:
    """A checked policy: PolicyError for an unknown preset or rule."""
    preset = preset or DEFAULT_PRESET
    if preset not in PRESETS:
        raise PolicyError(f"unknown policy {preset!r}; use {' or '.join(PRESETS)}")
    names = tuple(sorted({a.strip() for a in allow or () if a and a.strip()}))
    unknown = [a for a in names if a not in REGISTRY]
    if unknown:
        raise PolicyError(f"unknown rule {unknown[0]!r}; `evokernel verify --list-rules` lists them")
    return Policy(preset, names)


def split(rules: list[str], policy: Policy) -> tuple[list[str], list[str]]:
    """(refused, reported) of the rule names raised, in order."""
    return [r for r in rules if policy.refuses(r)], [r for r in rules if not policy.refuses(r)]


def listing() -> list[tuple[str, str, str, str]]:
    """(name, stage, presets refusing it, help) for every rule, static first: `verify --list-rules`."""
    order = {STATIC: 0, RUN: 1}
    return [(r.name, r.stage, ",".join(p for p in PRESETS if r.refused_by(p)) or "-", r.help)
            for r in sorted(_DEFINITIONS, key=lambda r: (order[r.stage], r.name))]


#: the binary audit's symbol families that mean "a library does the work" (verifier.policy.binary_audit.BLAS,
#: ATEN_OP; a test checks they agree): reported under kernelbench, refused under strict
LIBRARY_FAMILIES = ("blas", "aten-op")


def finding_rule(family: str) -> str:
    """The rule a binary-audit finding of this symbol family raises."""
    return "binary-library" if family in LIBRARY_FAMILIES else "binary-import"
