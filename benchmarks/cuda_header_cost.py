"""What the torch headers cost nvcc: one small relu kernel TU compiled with the split plan's exact nvcc
command behind four header layouts, and the pybind11 bindings TU behind two.

    python benchmarks/cuda_header_cost.py [--repeat 2] [--out FILE.md]

Layouts of the kernel TU (`cuda.cu`: load_inline's three prelude lines, then the kernel):
  full   torch's own <torch/extension.h> (the whole C++ API and pybind11), as torch's load_inline builds it
  shim   the ATen shim (`verifier.build.split_build.SHIM_HEADER`: <ATen/ATen.h>), the split build's layout until now
  light  the light CUDA shim (`verifier.backends.cuda_plan.light_shim_files`): Tensor, options, the stream,
         TORCH_CHECK, dispatch macros and the factory functions only
  none   no torch header at all (an extern "C" launcher): the floor nvcc itself costs
Needs nvcc and a CUDA build of torch; the GPU itself is not used.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNEL = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_forward expects a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto scratch = torch::zeros({xc.size(0)}, xc.options());
    const int64_t n = xc.numel();
    const int threads = 256;
    relu_kernel<<<(n + threads - 1) / threads, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

BARE = r"""
#include <cstdint>
__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
extern "C" void relu_launch(const float* x, float* y, int64_t n, cudaStream_t stream) {
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
"""

BIND_LIGHT = "#include <torch/csrc/utils/pybind.h>\n#include <pybind11/stl.h>\n"


def _time(argv: list[str], cwd: Path) -> tuple[float, str]:
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    took = time.monotonic() - t0
    return took, "" if proc.returncode == 0 else (proc.stdout + proc.stderr)[-600:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)

    import torch

    from verifier.backends.cuda import _toolchain_id, toolchain_here
    from verifier.backends.cuda_plan import CUDA_PRELUDE, light_shim_files, normalise_spec, plan_cuda_build
    from verifier.build.split_build import SHIM_HEADER, InlineBuilder, Signature, _shared_bindings

    major, minor = torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0)
    arch = f"{major}.{minor}"
    chain = toolchain_here(arch, (torch.__version__, torch.version.cuda, _toolchain_id(), arch, sys.version_info[:2]))
    work = Path(tempfile.mkdtemp(prefix="evk-hdr-"))
    dirs = {"full": work / "full-none", "shim": work / "shim", "light": work / "light"}
    for d in dirs.values():
        d.mkdir()
    (dirs["shim"] / "torch").mkdir()
    (dirs["shim"] / "torch" / "extension.h").write_text(SHIM_HEADER)

    def read(rel: str):
        for inc in chain.torch_includes:
            if Path(inc, rel).is_file():
                return Path(inc, rel).read_text(errors="replace")
        return None

    for rel, text in light_shim_files(read).items():
        (dirs["light"] / rel).parent.mkdir(parents=True, exist_ok=True)
        (dirs["light"] / rel).write_text(text)

    spec = normalise_spec("evk_hdr", "torch::Tensor relu_forward(torch::Tensor x);", KERNEL, ["relu_forward"],
                          extra_cuda_cflags=["-O3"])
    rows = []
    for layout in ("full", "shim", "light", "none"):
        plan = plan_cuda_build(spec, chain, str(dirs.get(layout, dirs["full"])),
                               headers="light" if layout == "light" else "full")
        step = plan.compile_steps[0]
        src = CUDA_PRELUDE + KERNEL if layout != "none" else "#include <cuda_runtime.h>\n" + BARE
        d = work / f"tu-{layout}"
        d.mkdir()
        (d / "cuda.cu").write_text(src)
        base = list(step.argv[:-4])
        if layout == "full":  # torch's own headers: the shim directory is empty, so <torch/extension.h> is torch's
            base += ["-isystem", chain.torch_includes[1]] if len(chain.torch_includes) > 1 else []
        cmd = [*base, "-c", "cuda.cu", "-o", "cuda.o"]
        times, err = [], ""
        for i in range(max(1, args.repeat)):
            took, err = _time([*cmd, "--time", "phases.csv"] if i == 0 else cmd, d)
            times.append(took)
            if err:
                break
        phases = ""
        if not err:
            csv = (d / "phases.csv").read_text(errors="replace") if (d / "phases.csv").exists() else ""
            phases = _phases(csv)
        lines = subprocess.run([*base, "-E", "cuda.cu"], cwd=d,
                               capture_output=True, text=True).stdout.count("\n") if not err else 0
        rows.append((f"kernel TU, {layout}", times, err, lines, phases))
        print(rows[-1], flush=True)

    bflags = InlineBuilder(work / "bind-flags")._base_flags()
    for label, header in (("bindings TU, torch/extension.h (now)", None), ("bindings TU, torch/csrc/utils/pybind.h", BIND_LIGHT)):
        d = work / f"bind-{len(rows)}"
        d.mkdir()
        text = _shared_bindings("evk_bind_bench", [Signature("torch::Tensor", ("torch::Tensor",))])
        if header:
            text = text.replace("#include <torch/extension.h>\n", header)
        (d / "bind.cpp").write_text(text)
        cmd = [chain.cxx, *bflags, "-O1", "-DTORCH_EXTENSION_NAME=evk_bind_bench", "-c", "bind.cpp", "-o", "bind.o"]
        took, err = _time(cmd, d)
        rows.append((label, [took], err, 0, ""))
        print(rows[-1], flush=True)

    now = dt.datetime.now(dt.UTC)
    out = [f"# nvcc and g++ over torch's headers, {now.strftime('%Y-%m-%d %H:%M UTC')}", "",
           f"Command: `python {' '.join(['benchmarks/cuda_header_cost.py', *(argv or sys.argv[1:])])}`", "",
           f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU'}; torch {torch.__version__}, "
           f"nvcc `{_toolchain_id()}`, arch {arch}, python {platform.python_version()}, {platform.node()}", "",
           "| TU | seconds (each run) | median s | preprocessed lines | nvcc --time phases (ms) | error |",
           "| --- | --- | --- | --- | --- | --- |"]
    for label, times, err, lines, phases in rows:
        out.append(f"| {label} | {', '.join(f'{t:.2f}' for t in times)} | {statistics.median(times):.2f} | "
                   f"{lines or '-'} | {phases or '-'} | {err.strip().splitlines()[-1][:200] if err else ''} |")
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


def _phases(csv: str) -> str:
    """nvcc --time's CSV, one `phase tool: ms` per row (the columns differ between nvcc versions: the
    phase is the column named so, the time the last numeric column)."""
    rows = [ln.split(",") for ln in csv.strip().splitlines() if ln.strip()]
    if not rows:
        return ""
    head = [h.strip().lower() for h in rows[0]]
    name = next((i for i, h in enumerate(head) if "phase" in h), 1)
    tool = next((i for i, h in enumerate(head) if h == "tool"), None)
    out = []
    for r in rows[1:]:
        nums = [float(x) for x in r if _num(x.strip())]
        if not nums or len(r) <= name:
            continue
        label = r[name].strip() + (f" ({r[tool].strip()})" if tool is not None and len(r) > tool else "")
        out.append(f"{label} {nums[-1]:.0f}")
    return "; ".join(out)


def _num(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
