"""What the sandbox's harness installs into the candidate's process before importing it: the builder's
`load_inline` in place of torch's (every build recorded, the exact source reported to the parent before
it compiles), the counting wrapper around every built module (kernel calls per forward, the decoy
probe's garbling: `verifier.correctness.decoy`), and the request line for shared artefacts the trusted side builds.

Kept apart from `verifier.workers.harness` so the backends can install it without importing the harness (which
preloads the backends: the cycle base -> harness -> cuda -> base)."""

from __future__ import annotations

import os

MAX_SOURCE_MARK = 256 * 1024


def report_built_source(sources: list[str]) -> None:
    """Tell the parent exactly which C++/CUDA text is about to be compiled, before it can run: sources
    assembled at run time (string concatenation) never appear as literals for the static scan."""
    fd = os.environ.get("EVK_PROGRESS_FD")
    if not fd:
        return
    text = "\n".join(sources)
    from verifier.sandbox.channel import Channel

    Channel(int(fd), None).mark("source", text=text[:MAX_SOURCE_MARK], truncated=len(text) > MAX_SOURCE_MARK)


_ANSWERED: dict[str, int] = {}


def request_artefact(kind: str, spec: dict, wait: bool | str = True) -> None:
    """Ask the trusted side to build a shared artefact (a precompiled header, bindings): the sandbox can
    read the shared tree but never write it. `wait=False` only asks; `wait="only"` only waits; answers
    name their kind, so waits for different kinds never take each other's answer."""
    from verifier.sandbox.channel import Channel

    channel = Channel.from_env()
    if wait != "only":
        channel.mark("need", kind=kind, spec=spec)
    if not wait:
        return
    while _ANSWERED.get(kind, 0) == 0:
        answer = channel.recv()
        if answer.get("cmd") != "built":
            return
        _ANSWERED[str(answer.get("kind"))] = _ANSWERED.get(str(answer.get("kind")), 0) + 1
    _ANSWERED[kind] -= 1


class CountingModule:
    """Wraps a built extension so the harness can tell whether forward called the custom kernel (and,
    in the decoy probe, replace what each call produced: `verifier.correctness.decoy`). The counter lives in the
    wrapper's closure, not on an attribute the candidate could read."""

    def __init__(self, module, counter: dict):
        from verifier.correctness.decoy import through

        def wrap(name: str, attr):
            def counted(*args, **kwargs):
                counter["calls"] += 1
                if counter.get("profiling"):
                    from torch.profiler import record_function

                    with record_function(f"kernel::{name}"):
                        return through(counter, attr, args, kwargs)
                return through(counter, attr, args, kwargs)

            counted.__name__ = name
            return counted

        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_wrap", wrap)

    def __getattr__(self, name):
        attr = getattr(self._module, name)
        if callable(attr) and not name.startswith("__"):
            return self._wrap(name, attr)
        return attr


def install_inline_builder(builder, counter: dict, report: dict) -> None:
    """Inside the sandbox: route `cpp_extension.load_inline` through `builder` (CPU or CUDA), record its
    builds for the compile gate and count calls into the built module for the anti-hacking gate."""
    from torch.utils import cpp_extension

    report["builds"] = []

    def load_inline(*args, **kwargs):
        sources = []
        for position, key in ((1, "cpp_sources"), (2, "cuda_sources")):
            value = kwargs.get(key, args[position] if len(args) > position else None)
            sources += [value] if isinstance(value, str) else [str(v) for v in (value or [])]
        report_built_source(sources)
        mod = builder.load_inline(*args, **kwargs)
        report["builds"] = [vars(r) for r in builder.records]
        return CountingModule(mod, counter)

    def load(*args, **kwargs):
        raise RuntimeError("cpp_extension.load from files is not supported; pass the sources to load_inline")

    cpp_extension.load_inline = load_inline
    cpp_extension.load = load
