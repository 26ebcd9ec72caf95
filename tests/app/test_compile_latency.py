"""Bug: a kernel's compile error waited for the bindings compiler (cc1plus kept the pipe open).

The bindings of a new function signature compile alongside the kernel; when the kernel fails, the
bindings compiler and its children are killed and the error comes back at once.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.alone]  # alone: it times things (tests/conftest.py)


def _compilers_on(path_part: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if path_part.encode() in fh.read():
                        found.append(int(entry))
            except OSError:
                continue
    return found


def _copy_light_headers(root: Path) -> None:
    """The light headers and common bindings that `scripts/setup.sh` prewarmed, copied (content-keyed:
    `prewarm` below builds whatever is missing, about a minute cold), but never the bindings' own header
    (`evk_full`): without it a new signature's bindings take long enough to show any wait."""
    source = Path(os.environ["EVOKERNEL_TEST_PREWARMED"])  # tests/conftest.py
    for kind in ("pch", "bind"):
        for d in sorted(source.glob(f"{kind}/*")) if source.is_dir() else []:
            if d.is_dir() and not d.name.startswith("evk_full"):
                shutil.copytree(d, root / kind / d.name, symlinks=True,
                                ignore=shutil.ignore_patterns("*.lock", "*.tmp*", ".*"))


def test_compile_error_does_not_wait_for_the_bindings(tmp_path):
    from verifier.build.shared_artefacts import prewarm
    from verifier.build.split_build import BuildError, InlineBuilder

    root = tmp_path / "build"
    # warm headers: the state the app reaches shortly after launch (before the bindings' own header)
    _copy_light_headers(root)
    prewarm(root, flag_sets=(["-O3"],), bind_header=False)
    # a signature no earlier test has built bindings for
    params = ", ".join(f"int64_t p{i}" for i in range(3 + uuid.uuid4().int % 5))
    source = f"torch::Tensor broken(torch::Tensor x, {params}) {{\n  int y = 1\n  return x;\n}}\n"
    builder = InlineBuilder(root)
    start = time.monotonic()
    with pytest.raises(BuildError) as info:
        builder.load_inline("latency_probe", source, functions=["broken"], extra_cflags=["-O3"])
    took = time.monotonic() - start
    assert "error" in str(info.value)
    assert took < 8.0, f"the compile error took {took:.1f} s (bindings compiler waited for?)"
    time.sleep(0.2)
    assert _compilers_on(str(root / "bind")) == [], "the bindings compiler (or cc1plus) was left running"
