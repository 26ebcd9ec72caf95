"""Backends: how a candidate is built and where it runs. Gates never look inside a backend."""

from __future__ import annotations

from verifier.backends.base import Backend, BackendUnavailable
from verifier.backends.cpu import CpuBackend

_REGISTRY: dict[str, str] = {
    "cpu": "verifier.backends.cpu:CpuBackend",
    "cuda": "verifier.backends.cuda:CudaBackend",
    "triton": "verifier.backends.triton:TritonBackend",
}


def backend_names() -> list[str]:
    return list(_REGISTRY)


def get_backend(name: str) -> Backend:
    """The backend called `name`; BackendUnavailable (one line) if unknown or not built into this install."""
    import importlib

    spec = _REGISTRY.get(name)
    if spec is None:
        raise BackendUnavailable(f"unknown backend {name!r}; choose one of: {', '.join(_REGISTRY)}")
    module_name, cls_name = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise BackendUnavailable(f"the {name} backend is not available in this build ({exc.name} is missing)") from exc
    return getattr(module, cls_name)()


__all__ = ["Backend", "BackendUnavailable", "CpuBackend", "backend_names", "get_backend"]
