"""A full disk is named as such: a CI run lost two tests to "the precompiled header failed to build"
with no reason given, when the disk holding the build root had filled up."""

from __future__ import annotations

import stat

import pytest

from verifier.build.split_build import BuildError, InlineBuilder

# A compiler that answers its version like the real one and fails every build the way gcc does on a full disk.
FULL_DISK_CXX = """#!/bin/sh
for a in "$@"; do case "$a" in --version|-dumpversion|-dumpfullversion|-v|-E) exec c++ "$@";; esac; done
echo "cc1plus: fatal error: cannot write PCH file: No space left on device" >&2
echo "compilation terminated." >&2
exit 1
"""


def test_a_full_disk_is_reported_with_the_build_root_and_what_to_do(tmp_path, monkeypatch):
    cxx = tmp_path / "cxx"
    cxx.write_text(FULL_DISK_CXX)
    cxx.chmod(cxx.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CXX", str(cxx))
    root = tmp_path / "builds"
    builder = InlineBuilder(root)
    source = "#include <torch/extension.h>\ntorch::Tensor full_disk(torch::Tensor x) { return x; }\n"
    with pytest.raises(BuildError) as err:
        builder.load_inline("full_disk", source, functions=["full_disk"], extra_cflags=["-O2"])
    message = str(err.value)
    assert message.startswith("no space left on the disk holding "), message
    assert str(root) in message and "EVOKERNEL_BUILD_DIR" in message
    assert any("No space left on device" in d for d in err.value.diagnostics) or "No space" in err.value.log


def test_a_header_that_fails_for_another_reason_says_which_header_and_why(tmp_path, monkeypatch):
    cxx = tmp_path / "cxx"
    cxx.write_text(FULL_DISK_CXX.replace("cannot write PCH file: No space left on device", "evk.h: bad header"))
    cxx.chmod(cxx.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CXX", str(cxx))
    monkeypatch.setenv("EVOKERNEL_TINY_CPU", "0")
    builder = InlineBuilder(tmp_path / "builds")
    with pytest.raises(BuildError) as err:
        builder.load_inline("bad_header", "int f(int x) { return x; }\n", functions=["f"])
    message = str(err.value)
    assert "no space" not in message
    assert message == "the precompiled header evk_shim failed to build: cc1plus: fatal error: evk.h: bad header"
