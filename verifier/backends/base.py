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
