"""Command-line options that several commands share, defined once.

Each is a click decorator (a group of related options is one decorator), so `--backend` means the same
choices, default and help in `verify`, `draft`, `tui` and `bench`, and a fix lands everywhere at once.
Only click is imported here: the app's first paint must not pay for the layers the options configure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

BACKENDS = ("cpu", "cuda", "triton")
POLICIES = ("kernelbench", "strict")  # verifier.policy.rules.PRESETS (a test checks)
TOLERANCE_PRESETS = ("kernelbench", "v0", "paper")  # verifier.correctness.compare.TOLERANCE_PRESETS (a test checks)
DEFAULT_MEMORY_GB = 8.0  # verifier.config.VerifyConfig().memory_gb (a test checks)


def stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several option decorators as one, listed in `--help` in the order given."""

    def apply(fn: F) -> F:
        for decorator in reversed(decorators):
            fn = decorator(fn)
        return fn

    return apply


backend = click.option("--backend", type=click.Choice(BACKENDS), default="cpu", show_default=True,
                       help="Where kernels run: cpu, cuda or triton.")
model = click.option("--model", default=None,
                     help="litellm model name (or scripted:FILE.json for canned replies); default: "
                          "$EVOKERNEL_MODEL or config.toml, else manual mode.")
api_base = click.option("--api-base", default=None,
                        help="Base URL of an OpenAI-compatible server (vLLM, Ollama, llama.cpp).")
sessions_dir = click.option("--sessions-dir", default=None, type=click.Path(file_okay=False),
                            help="Folder holding session folders (default: $EVOKERNEL_SESSIONS or ./sessions).")
threads = click.option("--threads", type=click.IntRange(1, 1024), default=None,
                       help="Threads for both sides of the paired timing (default: all cores).")
unsafe_no_isolation = click.option("--unsafe-no-isolation", "unsafe", is_flag=True,
                                   help="Run candidates without OS isolation (verdicts then say 'unisolated').")


def memory_bank(bank_help: str = "Memory bank file (default: $EVOKERNEL_MEMORY, config.toml or the user data dir).",
                off_help: str = "Run without the memory bank.") -> Callable[[F], F]:
    """--memory FILE / --no-memory (passed as `memory_path` and `no_memory`)."""
    return stack(click.option("--memory", "memory_path", default=None, help=bank_help),
                 click.option("--no-memory", is_flag=True, help=off_help))


kernelbench = stack(
    click.option("--kernelbench", default=None, type=click.Path(file_okay=False),
                 help="A KernelBench checkout (with --level and --problem)."),
    click.option("--level", type=int, default=None, help="KernelBench level."),
    click.option("--problem", type=int, default=None, help="KernelBench problem number."),
)

tolerance = stack(
    click.option("--tolerance", type=click.Choice(TOLERANCE_PRESETS), default="kernelbench", show_default=True,
                 help="kernelbench: fp32 1e-4, fp16/bf16 1e-2 (KernelBench today); v0 / paper: 1e-2 for every dtype."),
    click.option("--atol", default=None, type=float, help="Absolute tolerance (overrides --tolerance)."),
    click.option("--rtol", default=None, type=float, help="Relative tolerance (overrides --tolerance)."),
)


policy = stack(
    click.option("--policy", type=click.Choice(POLICIES), default=None,
                 help="Anti-hacking preset. kernelbench (default, or `policy` in config.toml): torch ops and "
                      "vendor libraries may do part of the work beside a custom kernel, and the verdict names "
                      "each with its share of forward's time; strict: all of the compute in custom kernels."),
    click.option("--allow", "allow_rules", multiple=True, metavar="RULE",
                 help="Switch one anti-hacking rule off for an experiment (repeatable; recorded in the verdict "
                      "and bench.json). `evokernel verify --list-rules` lists them."),
)


def memory_gb(default: float | None = DEFAULT_MEMORY_GB, then: str = "is refused up front") -> Callable[[F], F]:
    """--memory-gb: the verifier's memory limit; a problem estimated above it `then` (is refused, is skipped)."""
    return click.option("--memory-gb", type=click.FloatRange(min=0.5), default=default, show_default=default is not None,
                        help=f"Memory limit of the reference and candidate runs (default {DEFAULT_MEMORY_GB:g}); a "
                             f"problem estimated above it {then}.")


def json_output(help: str = "Print one JSON object.") -> Callable[[F], F]:
    return click.option("--json", "as_json", is_flag=True, help=help)


class Renamed(click.Option):
    """An option whose first name is the one to use; the others are its old names, still accepted for one
    release and hidden from `--help`, so every command shows one name with one meaning."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        names = self.opts
        self.opts = names[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = names


def steps(draft_default: int = 4, refine_default: int = 4, draft_min: int = 1) -> Callable[[F], F]:
    """--draft-steps / --refine-steps (passed as `draft_steps`, `refine_steps`); `draft`'s old --steps and
    --refine are hidden aliases."""
    return stack(
        click.option("--draft-steps", "--steps", "draft_steps", cls=Renamed, type=click.IntRange(draft_min, 100),
                     default=draft_default, show_default=True, help="Drafting steps: model calls that write a kernel."),
        click.option("--refine-steps", "--refine", "refine_steps", cls=Renamed, type=click.IntRange(0, 100),
                     default=refine_default, show_default=True,
                     help="Refining steps: model calls that try to make the best kernel faster."),
    )


model_timeout = click.option("--model-timeout", "--timeout", "model_timeout", cls=Renamed, type=float, default=120.0,
                             show_default=True, help="Seconds allowed for one model call.")
run_timeout = click.option("--run-timeout", "--timeout", "run_timeout", cls=Renamed, type=float, default=120.0,
                           show_default=True, help="Seconds allowed for running the candidate.")
