"""The CPU builder's Python bindings are keyed by function types only, so renaming a kernel's extension
or functions reuses them, and every loaded module still calls its own kernel."""

from __future__ import annotations

import os

import pytest

from verifier.build.split_build import Signature, extract_declarations, signature_of

SRC = """
#include <torch/extension.h>
torch::Tensor f1(const torch::Tensor& x, int64_t n, double eps = 1e-5) { return x; }
std::vector<torch::Tensor> f2(torch::Tensor a, std::vector<int64_t> dims) { return {a}; }
void f3(torch::Tensor out) {}
"""

RELU = """
#include <torch/extension.h>
torch::Tensor NAME(torch::Tensor x) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > THRESHOLD ? in[i] : 0.0f;
    return out;
}
"""


def test_signatures_keep_types_and_drop_names():
    decls = extract_declarations(SRC, ["f1", "f2", "f3"])
    sigs = [signature_of(d, f) for d, f in zip(decls, ["f1", "f2", "f3"], strict=True)]
    assert sigs == [
        Signature("torch::Tensor", ("const torch::Tensor&", "int64_t", "double")),
        Signature("std::vector<torch::Tensor>", ("torch::Tensor", "std::vector<int64_t>")),
        Signature("void", ("torch::Tensor",)),
    ]
    assert signature_of("int g(int a[4]);", "g") is None, "unusual declarators fall back to the full build"


@pytest.mark.slow
def test_renamed_kernels_share_bindings_but_run_their_own_code(shared_build_root):
    import torch

    from verifier.build.split_build import InlineBuilder

    builder = InlineBuilder(shared_build_root)
    x = torch.tensor([-1.0, 0.5, 1.5, 2.5])
    modules = []
    for ext, fn, threshold in [("renamed_a", "relu_a", 0.0), ("renamed_b", "relu_b", 1.0), ("renamed_c", "relu_a", 2.0)]:
        source = RELU.replace("NAME", fn).replace("THRESHOLD", f"{threshold}f")
        modules.append((builder.load_inline(ext, source, functions=[fn], extra_cflags=["-O3"]), fn, threshold))
    assert {r.layout for r in builder.records} == {"split"}
    bind_dirs = {p.parent for p in (shared_build_root / "bind").glob("*/bind.o")}
    for module, fn, threshold in modules:
        assert torch.equal(getattr(module, fn)(x), torch.where(x > threshold, x, torch.zeros_like(x)))
    again = InlineBuilder(shared_build_root)
    again.load_inline("renamed_d", RELU.replace("NAME", "relu_d").replace("THRESHOLD", "3.0f"), functions=["relu_d"],
                      extra_cflags=["-O3"])
    assert {p.parent for p in (shared_build_root / "bind").glob("*/bind.o")} == bind_dirs, "no new bindings built"


def test_one_compiler_reached_by_two_names_has_one_id(tmp_path, monkeypatch):
    """The trusted side may call the compiler through the person's CXX (a wrapper) while the sandbox,
    which gets no CXX, calls `c++`: the keys of the shared bindings must still agree, or every build
    compiles its own bindings (seen on an H100 machine with CXX=/opt/gcc/bin/g++)."""
    from verifier.build.split_build import _compiler_id

    def fake(name: str, line: str):
        path = tmp_path / name
        path.write_text(f"#!/bin/sh\necho '{line}'\necho 'Copyright (C) 2023'\n")
        path.chmod(0o755)
        return str(path)

    monkeypatch.setenv("CXX", fake("g++-wrapper", "g++-real (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"))
    wrapped = _compiler_id()
    monkeypatch.setenv("CXX", fake("c++", "c++ (Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"))
    assert _compiler_id() == wrapped == "(Ubuntu 13.3.0-6ubuntu2~24.04) 13.3.0"
    monkeypatch.setenv("CXX", fake("clang", "clang version 18.1.3 (1ubuntu1)"))
    assert _compiler_id() != wrapped, "another compiler is another key"
    monkeypatch.setenv("CXX", str(tmp_path / "missing"))
    assert _compiler_id() == "unknown"


def test_trusted_artefacts_are_built_with_the_sandboxs_compiler(tmp_path, monkeypatch):
    """The trusted side may have CXX pointing at a compiler the sandbox cannot see (the H100 machine:
    CXX=/opt/gcc/bin/g++, another gcc than the sandbox's /usr/bin/c++): shared artefacts are built with
    the sandbox's `c++`, so their keys are the ones a sandboxed build computes."""
    import verifier.build.shared_artefacts as shared_artefacts
    import verifier.build.split_build as build
    from verifier.api import _clean_env

    assert _clean_env()["PATH"] == build.SANDBOX_PATH and "CXX" not in _clean_env()
    wrapper = tmp_path / "g++"
    wrapper.write_text("#!/bin/sh\necho 'g++-real (Other 99.1) 99.1'\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    trusted_id = build._compiler_id()
    seen = []
    monkeypatch.setattr(shared_artefacts, "_build_shared", lambda root, kind, spec: seen.append(
        (os.environ.get("CXX"), build._compiler_id())) or True)
    assert shared_artefacts.build_shared(tmp_path, "bind", {})
    assert os.environ["CXX"] == str(wrapper), "the trusted side's own CXX is left as it was"
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", build.SANDBOX_PATH)
    sandbox_id = build._compiler_id()
    assert seen == [(build.sandbox_compiler(), sandbox_id)] and sandbox_id != trusted_id


SCALED = """
#include <torch/extension.h>
torch::Tensor NAME(torch::Tensor x, double scale, int64_t poison_signature) {
    auto out = torch::empty_like(x);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) o[i] = in[i] > THRESHOLD ? in[i] * (float)scale : 0.0f;
    return out;
}
"""


@pytest.mark.slow
def test_a_bindings_object_without_its_module_is_never_linked(shared_build_root):
    """CI found it: several builders of the same signatures at once rewrote one shared `bind.cpp` while
    another's compiler read it; an empty object (no `PyInit_<module>`) was cached and every later
    kernel of those signatures failed to import. A cached object without its module's init is rebuilt,
    and each build compiles a source of its own. (A signature no other test uses: its bindings alone are
    poisoned, in the suite's shared build root, whose precompiled header is already there.)"""
    import subprocess

    import torch

    from verifier.build.split_build import InlineBuilder, binding_object_ok

    fn = "scaled_relu_poison"
    before = set((shared_build_root / "bind").glob("*/bind.o"))
    InlineBuilder(shared_build_root).load_inline("poison_a", SCALED.replace("NAME", fn).replace("THRESHOLD", "0.0f"),
                                                 functions=[fn], extra_cflags=["-O3"])
    [obj] = set((shared_build_root / "bind").glob("*/bind.o")) - before
    module = "evk_bind_" + obj.parent.name[:16]
    assert binding_object_ok(obj, module)
    assert not list(obj.parent.glob("bind.cpp")), "no shared source another builder could rewrite"
    empty = shared_build_root / "empty.cpp"
    empty.write_text("")
    subprocess.run(["c++", "-c", str(empty), "-o", str(obj)], check=True)  # what the race left behind
    assert not binding_object_ok(obj, module)
    loaded = InlineBuilder(shared_build_root).load_inline(
        "poison_b", SCALED.replace("NAME", fn).replace("THRESHOLD", "1.0f"), functions=[fn], extra_cflags=["-O3"])
    x = torch.tensor([-1.0, 0.5, 1.5])
    assert torch.equal(getattr(loaded, fn)(x, 2.0, 0), torch.tensor([0.0, 0.0, 3.0]))
    assert binding_object_ok(obj, module), "the poisoned object was replaced"


@pytest.mark.slow
def test_a_linker_that_fails_where_the_default_works_is_left_for_the_default(shared_build_root, monkeypatch):
    """gold links kernels 2-3x faster, but could not open one toolchain's libstdc++.so (a GCC under /opt on a
    lent H100 host): the build must still link, with the default linker, and gold is not tried again. A
    kernel whose own link fails is still refused, and does not turn gold off."""
    import torch

    from verifier.build import split_build as build
    from verifier.build.split_build import BuildError, InlineBuilder

    monkeypatch.setitem(build._GOLD, "usable", True)
    monkeypatch.setattr(build, "_fast_linker", lambda: ["-Wl,--no-such-linker-flag-evk"])  # a linker that fails
    builder = InlineBuilder(shared_build_root)
    with pytest.raises(BuildError, match="linking failed"):
        builder.load_inline("link_bad_lib", RELU.replace("NAME", "relu_l0").replace("THRESHOLD", "0.5f"),
                            functions=["relu_l0"], extra_cflags=["-O3"], extra_ldflags=["-lno_such_library_evk"])
    assert build._GOLD["usable"], "a kernel's own link error is not the fast linker's fault"
    module = builder.load_inline("link_fallback", RELU.replace("NAME", "relu_l1").replace("THRESHOLD", "0.5f"),
                                 functions=["relu_l1"], extra_cflags=["-O3"])
    x = torch.tensor([-1.0, 0.25, 1.5])
    assert torch.equal(module.relu_l1(x), torch.where(x > 0.5, x, torch.zeros_like(x)))
    assert not build._GOLD["usable"]


COUNTING_CXX = """#!/bin/sh
for a in "$@"; do case "$a" in -DTORCH_EXTENSION_NAME=evk_bind_*) echo "$a" >> "{log}";; esac; done
exec c++ "$@"
"""


@pytest.mark.slow
def test_builders_of_one_bindings_object_at_once_compile_it_once(tmp_path, monkeypatch, shared_build_root):
    """The prewarm, the starter's prebuild and the person's first verification each built the same
    bindings TU at the same time: five compilers of one object on two cores, each five times slower.
    Builders of one object now take turns: one compiles, the others wait for it and link its object,
    and every kernel still runs its own code."""
    import shutil
    import threading

    import torch

    from verifier.build.split_build import InlineBuilder

    log = tmp_path / "bind-compiles.log"
    cxx = tmp_path / "cxx"
    cxx.write_text(COUNTING_CXX.format(log=log))
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", str(cxx))
    root = tmp_path / "builds"
    # A fresh root but for the bindings' precompiled header (where the suite's root has it): the one bindings
    # compile then takes ~9 s instead of 24 s, still far longer than the three builders take to start; the
    # kernels' own header (-O1) is built here, by one of them.
    for full in (shared_build_root / "pch").glob("evk_full-*"):
        shutil.copytree(full, root / "pch" / full.name, ignore=shutil.ignore_patterns("*.lock", "*.tmp*"))
    results: dict[str, object] = {}

    def build(name: str, threshold: str) -> None:
        try:
            mod = InlineBuilder(root).load_inline(name, RELU.replace("NAME", name).replace("THRESHOLD", threshold),
                                                  functions=[name], extra_cflags=["-O1"])
            results[name] = getattr(mod, name)(torch.tensor([-1.0, 0.5, 2.0]))
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[name] = exc

    threads = [threading.Thread(target=build, args=(f"herd_{i}", f"{i}.0f")) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(results) == {"herd_0", "herd_1", "herd_2"}, results
    assert results["herd_0"].tolist() == [0.0, 0.5, 2.0]
    assert results["herd_1"].tolist() == [0.0, 0.0, 2.0]
    assert results["herd_2"].tolist() == [0.0, 0.0, 0.0]
    compiles = log.read_text().splitlines()
    assert len(compiles) == 1, compiles


def test_threads_filling_a_fresh_build_root_do_not_rename_each_others_files(tmp_path):
    """The herd test above failed once in CI with FileNotFoundError: threads of one process wrote the tiny
    Tensor's headers under one temp name (`.tmp<pid>`), and one renamed the other's file away."""
    import threading

    from verifier.build.split_build import InlineBuilder

    errors: list[BaseException] = []
    for round_ in range(10):
        builders = [InlineBuilder(tmp_path / f"root{round_}") for _ in range(8)]
        start = threading.Barrier(len(builders))

        def fill(builder, start):
            try:
                start.wait()
                builder._tiny_dir()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=fill, args=(b, start)) for b in builders]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors, errors[:3]
