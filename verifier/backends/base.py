"""The backend seam: everything backend-specific that the sandboxed harness and the gates need."""

from __future__ import annotations

from dataclasses import dataclass


class BackendUnavailable(Exception):
    """The backend cannot run here (no GPU, no toolchain); the message says what to do."""


@dataclass
class Backend:
    """A build-and-run target. Subclasses set the fields and may override `availability`.

    `installer` is "module:function", imported inside the sandbox to hook the candidate's build calls
    (e.g. `load_inline`); `device` is where tensors live; `counts_kernel_calls` says whether the installer
    can count calls into the custom kernel (for the "custom kernel does none of the work" rule).
    """

    name: str = "base"
    device: str = "cpu"
    installer: str = ""
    counts_kernel_calls: bool = True
    interpreted: bool = False

    def availability(self) -> str | None:
        """None when usable here, else a one-line reason with what to do."""
        return None

    def check_available(self) -> None:
        reason = self.availability()
        if reason:
            raise BackendUnavailable(reason)

    def job_fields(self) -> dict:
        """Extra fields for the harness job (timing style, environment)."""
        return {}

    def child_env(self) -> dict[str, str]:
        return {}


def install_inline_builder(builder, counter: dict, report: dict) -> None:
    """Inside the sandbox: route `cpp_extension.load_inline` through `builder` (CPU or CUDA), record its
    builds for the compile gate and count calls into the built module for the anti-hacking gate."""
    from torch.utils import cpp_extension

    from verifier.harness import CountingModule, report_built_source

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
