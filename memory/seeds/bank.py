"""Seed items written for EvoKernel: (slug, backends, category, title, tags, text)."""

from __future__ import annotations

_CONTRACT_COMMON = """
Write a KernelBench `ModelNew`: `class ModelNew(nn.Module)` whose `__init__` takes exactly the same
arguments as the reference `Model` (create the same parameters/buffers, in the same order, so state
can be copied), and whose `forward` takes the same inputs and returns the same outputs (shape,
dtype, device) computed through YOUR custom kernel. The anti-hacking gate rejects: calling the
reference torch op being replaced (e.g. torch.softmax, F.conv2d, torch.matmul, @) inside forward;
torch.compile or torch.jit; try/except that falls back to torch; caching or memoising outputs
across calls; monkey-patching torch or the reference module; reading the reference result.
Allocation helpers (torch.empty, empty_like, .contiguous(), .view) are fine.
"""

SEEDS: list[tuple[str, tuple[str, ...], str, str, tuple[str, ...], str]] = [
    # ------------------------------------------------------------------ contracts
    (
        "cpu-contract",
        ("cpu",),
        "contract",
        "Kernel contract for the CPU C++ backend",
        ("contract", "modelnew", "load_inline", "cpp"),
        _CONTRACT_COMMON
        + """
CPU form: put the C++ in a string, build it once at import time with
`torch.utils.cpp_extension.load_inline(name="k_<unique>", cpp_sources=src, functions=["forward"],
extra_cflags=["-O3", "-march=native", "-fopenmp"], extra_ldflags=["-fopenmp"], verbose=False)`
and call `self.ext.forward(x, ...)` in ModelNew.forward. `functions=[...]` generates the pybind11
bindings, so do not write PYBIND11_MODULE yourself. Take `torch::Tensor` arguments, call
`.contiguous()`, check `x.scalar_type() == torch::kFloat32`, read with `x.data_ptr<float>()`.
""",
    ),
    (
        "cuda-contract",
        ("cuda",),
        "contract",
        "Kernel contract for the CUDA backend",
        ("contract", "modelnew", "load_inline", "cuda"),
        _CONTRACT_COMMON
        + """
CUDA form: `load_inline(name=..., cpp_sources=decl, cuda_sources=src, functions=["forward"],
extra_cuda_cflags=["-O3", "--use_fast_math"])` where `decl` holds the C++ declaration
`torch::Tensor forward(torch::Tensor x);` and `src` holds the __global__ kernel plus the host
wrapper that computes the grid, launches `kernel<<<blocks, threads, 0,
at::cuda::getCurrentCUDAStream()>>>` and returns the output tensor. Check `x.is_cuda()` and
`x.is_contiguous()`; allocate outputs with `torch::empty_like(x)`.
""",
    ),
    (
        "triton-contract",
        ("triton",),
        "contract",
        "Kernel contract for the Triton backend",
        ("contract", "modelnew", "triton", "jit"),
        _CONTRACT_COMMON
        + """
Triton form: define `@triton.jit` kernels at module level with pointer arguments, strides and
`tl.constexpr` block sizes; the ModelNew.forward allocates the output with torch.empty_like,
computes `grid = (triton.cdiv(n, BLOCK),)` and launches `kernel[grid](x, y, n, BLOCK=1024)`. Pass
tensors, not `.data_ptr()`. Only torch allocation and shape logic may surround the launch.
""",
    ),
    # ------------------------------------------------------------------ CPU C++
    (
        "cpu-build-flags",
        ("cpu",),
        "build",
        "CPU build flags for load_inline",
        ("build", "flags", "openmp", "march", "compile"),
        """
Use extra_cflags=["-O3", "-march=native", "-ffast-math" only if tolerance allows, "-fopenmp"] and
extra_ldflags=["-fopenmp"]. Without -fopenmp at link time the `#pragma omp` lines are ignored or
the import fails with "undefined symbol: omp_get_thread_num". Give each variant a distinct `name=`
in load_inline: the build cache is keyed by name, and a stale module with the same name is reused.
""",
    ),
    (
        "cpu-openmp-parallel",
        ("cpu",),
        "parallel",
        "Parallelise the outer loop with OpenMP",
        ("openmp", "parallel", "threads", "rows"),
        """
Put `#pragma omp parallel for schedule(static)` on the outermost independent loop (rows, batch,
output channels) so each thread owns contiguous output. Never parallelise a loop whose iterations
write the same output element (race); for reductions across threads use
`#pragma omp parallel for reduction(+:acc)` or per-thread partials combined afterwards. For tiny
problems the thread start-up dominates: add `if(n > 4096)` to the pragma.
""",
    ),
    (
        "cpu-vectorise",
        ("cpu",),
        "vectorise",
        "Help the compiler vectorise inner loops",
        ("simd", "vectorisation", "avx", "restrict", "inner loop"),
        """
Keep the innermost loop unit-stride over contiguous memory, mark pointers `__restrict__`, hoist
invariants out of the loop and avoid branches inside it; then `#pragma omp simd` (with
`reduction(+:s)` for sums) lets GCC emit AVX2/AVX-512 code under -O3 -march=native. Check with
`-fopt-info-vec-missed`. Accumulate in several independent partial sums (4-8) to break the
floating-point dependency chain of a reduction.
""",
    ),
    (
        "cpu-matmul-tiling",
        ("cpu",),
        "matmul",
        "Cache-blocked matmul on CPU",
        ("matmul", "gemm", "tiling", "blocking", "cache"),
        """
Loop order i-k-j (C[i][j] += A[i][k] * B[k][j]) makes the inner loop unit-stride over B and C and
vectorisable; the naive i-j-k order strides through B by columns. Block for cache: tiles of
64x64..256x256 floats for L2, parallelise over row blocks of C with OpenMP, and keep a small
register tile (e.g. 4x16) of C in locals inside the micro-kernel. Transposing B once into a packed
buffer pays off for large K.
""",
    ),
    (
        "cpu-reduction-rows",
        ("cpu",),
        "reduction",
        "Row reductions (sum, mean, max) on CPU",
        ("reduction", "sum", "mean", "max", "rows"),
        """
Parallelise over rows, reduce each row with a vectorised loop into several accumulators, and use
double or Kahan summation when rows are long (> 1e5) and the tolerance is tight. For reductions
over a non-last dimension, iterate so the inner loop walks the contiguous dimension and accumulate
into a row of partial results instead of striding.
""",
    ),
    (
        "cpu-softmax",
        ("cpu",),
        "softmax",
        "Numerically safe softmax on CPU",
        ("softmax", "numerics", "max subtraction", "exp"),
        """
Per row: m = max(x); s = sum(exp(x - m)); y = exp(x - m) / s. Subtracting the row max prevents
overflow to inf for large logits. Fuse into two passes (max, then exp+sum storing exp values, then
scale by 1/s) and parallelise rows with OpenMP. Use std::exp on float (expf) and multiply by the
reciprocal instead of dividing per element.
""",
    ),
    (
        "cpu-compile-errors",
        ("cpu",),
        "compile-errors",
        "Common C++ extension compile errors and fixes",
        ("compile", "error", "pybind11", "template", "data_ptr"),
        """
- "no matching function for call to data_ptr": use `x.data_ptr<float>()` (template form).
- "redefinition of PyInit" / duplicate module: do not write PYBIND11_MODULE when using
  `functions=[...]`.
- "undefined symbol" at import: a declared function has no definition, or -fopenmp missing in
  extra_ldflags.
- "expected ';'" in the source string: a Python string escape ate a backslash; use r-strings.
- Returning a dangling pointer: always return a torch::Tensor allocated with torch::empty.
""",
    ),
    (
        "cpu-conv-im2col",
        ("cpu",),
        "conv",
        "Convolution on CPU: direct loops vs im2col",
        ("conv", "conv2d", "im2col", "channels"),
        """
For small kernels (3x3) a direct convolution with the output-channel loop outermost (parallel),
then output rows, then input channels, then the kernel window, and the output-column loop
innermost (vectorised) is simple and fast. For large channel counts, im2col into a packed buffer
and reuse a blocked matmul. Handle stride, padding and dilation exactly as in the reference; check
output size = (H + 2p - d(k-1) - 1) / s + 1.
""",
    ),
    (
        "cpu-elementwise-fusion",
        ("cpu",),
        "elementwise",
        "Fuse elementwise chains into one pass",
        ("elementwise", "fusion", "activation", "memory bound"),
        """
Elementwise ops are memory bound: fuse the whole chain (e.g. x*scale + bias then GELU then clamp)
into one loop so each element is read and written once. Parallelise the flat loop with
`#pragma omp parallel for simd`. Handle broadcasting by computing indices from sizes/strides, or
require contiguous inputs and expand the broadcast operand explicitly.
""",
    ),
    # ------------------------------------------------------------------ CUDA
    (
        "cuda-coalescing",
        ("cuda",),
        "memory",
        "Coalesced global memory access",
        ("coalescing", "global memory", "bandwidth", "threadIdx"),
        """
Consecutive threads of a warp should touch consecutive addresses: index with
`i = blockIdx.x * blockDim.x + threadIdx.x` over the contiguous (last) dimension. Strided or
transposed access splits a warp's load into many transactions. Use vectorised loads (`float4`,
aligned to 16 bytes) for bandwidth-bound kernels, with a scalar tail loop for the remainder.
""",
    ),
    (
        "cuda-shared-tiling",
        ("cuda",),
        "matmul",
        "Shared-memory tiling for CUDA matmul",
        ("matmul", "gemm", "shared memory", "tiling", "__syncthreads"),
        """
Load TILE x TILE blocks of A and B into `__shared__ float As[TILE][TILE+1]` (the +1 padding
avoids bank conflicts), `__syncthreads()`, accumulate the partial dot products from shared memory,
`__syncthreads()` again before the next tile. Each thread computing a small register tile
(e.g. 4x4 or 8x8 outputs) raises arithmetic intensity far more than a bigger shared tile.
Guard loads at the matrix edges with bounds checks, filling zeros.
""",
    ),
    (
        "cuda-warp-reduce",
        ("cuda",),
        "reduction",
        "Warp-shuffle reductions",
        ("reduction", "warp", "shfl", "__shfl_down_sync", "block reduce"),
        """
Reduce within a warp with `for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffff, v, o);`
then write each warp's result to shared memory and let the first warp reduce those. This avoids
shared-memory round trips and most __syncthreads. For row reductions launch one block (or one warp
for short rows) per row; grid-stride loops let one launch cover any size.
""",
    ),
    (
        "cuda-softmax-online",
        ("cuda",),
        "softmax",
        "Online softmax in one pass on CUDA",
        ("softmax", "online", "numerics", "warp", "max"),
        """
Keep a running max m and running sum s per thread: for each x, m_new = max(m, x);
s = s * exp(m - m_new) + exp(x - m_new). Combine (m, s) pairs across the warp/block with the same
rescaling rule, then write y = exp(x - m) / s in a second pass. Use `__expf` only when tolerance
allows; expf is safer for atol 1e-2 with large inputs.
""",
    ),
    (
        "cuda-launch-config",
        ("cuda",),
        "launch",
        "Choosing block and grid sizes",
        ("launch", "occupancy", "block size", "grid", "threads"),
        """
Use 128-256 threads per block (a multiple of 32). For elementwise kernels use a grid-stride loop
with `blocks = min(cdiv(n, threads), 65535 * ...)`, or simply `cdiv(n, threads)` for 1-D sizes
under 2^31. Check `cudaGetLastError()` after launch in debug builds. Too many registers or too
much shared memory per block lowers occupancy; `__launch_bounds__(256)` helps the compiler.
""",
    ),
    (
        "cuda-compile-errors",
        ("cuda",),
        "compile-errors",
        "Common CUDA extension compile errors and fixes",
        ("compile", "error", "nvcc", "stream", "half"),
        """
- "identifier at::cuda::getCurrentCUDAStream is undefined": `#include <ATen/cuda/CUDAContext.h>`.
- "no suitable conversion from c10::Half": use `at::Half` and `__half` casts, or dispatch with
  AT_DISPATCH_FLOATING_TYPES_AND_HALF.
- "calling a __host__ function from a __global__ function": use device math (expf, fmaxf), not
  std:: functions, inside kernels.
- Declaring the host function only in cuda_sources: put its declaration in cpp_sources too.
""",
    ),
    (
        "cuda-layernorm",
        ("cuda",),
        "norm",
        "LayerNorm / RMSNorm on CUDA",
        ("layernorm", "rmsnorm", "norm", "numerics", "welford", "variance"),
        """
One block per row; compute mean and variance with Welford's algorithm (or sum and sum of squares
in float, accumulated per thread and reduced with warp shuffles). Use the biased variance with
`rsqrtf(var + eps)` exactly as the reference (LayerNorm uses biased variance; eps inside the
sqrt). Apply weight and bias in the same pass as the normalisation.
""",
    ),
    (
        "cuda-bank-conflicts",
        ("cuda",),
        "memory",
        "Avoid shared-memory bank conflicts",
        ("shared memory", "bank conflicts", "transpose", "padding"),
        """
Shared memory has 32 banks of 4 bytes; threads of a warp hitting the same bank at different
addresses serialise. When reading a tile by column (transpose, matmul B tile), pad the row length
by one element (`[TILE][TILE + 1]`) or swizzle the index. Broadcast reads of the same address are
free.
""",
    ),
    (
        "cuda-fusion",
        ("cuda",),
        "elementwise",
        "Kernel fusion on CUDA",
        ("fusion", "elementwise", "epilogue", "activation", "launch overhead"),
        """
Fuse bias, activation, residual add and scaling into the producing kernel's epilogue instead of
separate launches: each launch costs ~5 us and each intermediate a full read+write of global
memory. For chains of pure elementwise ops, one kernel with one read and one write per element
reaches memory bandwidth.
""",
    ),
    # ------------------------------------------------------------------ Triton
    (
        "triton-blocks-masks",
        ("triton",),
        "elementwise",
        "Triton block pointers and masks",
        ("triton", "mask", "tl.load", "block", "elementwise"),
        """
`pid = tl.program_id(0); offs = pid * BLOCK + tl.arange(0, BLOCK); mask = offs < n;
x = tl.load(x_ptr + offs, mask=mask, other=0.0); tl.store(y_ptr + offs, y, mask=mask)`.
BLOCK must be a power of two and a tl.constexpr. Every load/store past the end needs the mask;
`other=` must be neutral for what follows (0 for sums, -inf for max).
""",
    ),
    (
        "triton-softmax",
        ("triton",),
        "softmax",
        "Row softmax in Triton",
        ("triton", "softmax", "rows", "numerics", "next_power_of_2"),
        """
One program per row with `BLOCK = triton.next_power_of_2(n_cols)`; load the row with
`other=-float('inf')`, `z = x - tl.max(x, axis=0); num = tl.exp(z); y = num / tl.sum(num, axis=0)`.
Use row strides (`x.stride(0)`) rather than assuming contiguity. For very long rows (> 64K) loop
over chunks with an online max/sum.
""",
    ),
    (
        "triton-matmul",
        ("triton",),
        "matmul",
        "Triton matmul with tl.dot",
        ("triton", "matmul", "tl.dot", "autotune", "grouped ordering"),
        """
Tile with BLOCK_M, BLOCK_N, BLOCK_K (e.g. 128, 128, 32), loop over K loading A and B tiles with
masks and accumulate `acc += tl.dot(a, b)` in float32. Grouped program ordering (GROUP_M) improves
L2 reuse. `@triton.autotune(configs=[...], key=["M", "N", "K"])` over a few block sizes and
num_warps/num_stages values finds a good config per shape. tl.dot needs block dims >= 16.
""",
    ),
    (
        "triton-reduction",
        ("triton",),
        "reduction",
        "Reductions in Triton",
        ("triton", "reduction", "tl.sum", "atomic", "rows"),
        """
Reduce within a program with `tl.sum(x, axis=...)` / `tl.max`. For a reduction longer than one
block loop over chunks accumulating in a float32 register block, then reduce once. Cross-program
reductions need `tl.atomic_add` (non-deterministic order) or a second kernel over partials; prefer
the two-kernel form when tolerance is tight.
""",
    ),
    (
        "triton-compile-errors",
        ("triton",),
        "compile-errors",
        "Common Triton errors and fixes",
        ("triton", "compile", "error", "constexpr", "arange"),
        """
- "arange's range must be a power of 2": round BLOCK up with triton.next_power_of_2 and mask.
- "unsupported tensor index" / Python control flow on tensors: use tl.where, not if on values.
- "constexpr" errors: block sizes passed as keyword args must be annotated `: tl.constexpr`.
- Pointer type errors: pass torch tensors to the kernel, not Python ints; cast scalars explicitly.
- Results off by a stride: pass `x.stride(0)` and multiply, never assume contiguity.
""",
    ),
    (
        "triton-norm",
        ("triton",),
        "norm",
        "LayerNorm / RMSNorm in Triton",
        ("triton", "layernorm", "rmsnorm", "norm", "variance"),
        """
One program per row: load the row (masked, other=0), `mean = tl.sum(x) / n`,
`xc = tl.where(mask, x - mean, 0)`, `var = tl.sum(xc * xc) / n`, `y = xc * tl.rsqrt(var + eps) * w + b`.
The tl.where keeps padded lanes out of the variance. Compute in float32 even for half inputs.
""",
    ),
    # ------------------------------------------------------------------ cross-backend
    (
        "numerics-tolerance",
        (),
        "numerics",
        "Meeting the correctness tolerance",
        ("numerics", "tolerance", "atol", "rtol", "float32", "accumulation"),
        """
The correctness gate compares against the reference with atol=rtol=1e-2 over several random
inputs. Accumulate in float32 (or double for long reductions), keep the reference's order of
operations where it matters (eps placement in norms, biased vs unbiased variance, max subtraction
in softmax), and never use approximations like fast exp unless the error is far inside tolerance.
""",
    ),
    (
        "pitfall-shapes-strides",
        (),
        "pitfalls",
        "Shapes, strides and contiguity pitfalls",
        ("pitfalls", "strides", "contiguous", "shapes", "broadcast"),
        """
Inputs may be non-contiguous views (transposed, sliced); call .contiguous() or honour strides.
Kernels written for one shape break on others: derive every size from the tensor at run time, not
from get_inputs() constants. Output dtype and shape must match the reference exactly, including
keepdim behaviour of reductions and broadcasting of bias.
""",
    ),
    (
        "pitfall-hacking",
        (),
        "pitfalls",
        "What the anti-hacking gate rejects",
        ("anti-hacking", "pitfalls", "fallback", "torch ops", "contract"),
        """
Rejected: calling the very torch op you replace (torch.softmax, F.linear, torch.matmul, @,
torch.nn.functional.*) in forward; torch.compile/jit; try/except returning a torch computation;
caching outputs keyed on inputs; returning inputs unchanged; patching torch functions; importing
the reference Model. The fix is always to implement the computation in the kernel itself.
""",
    ),
    (
        "opt-memory-bound",
        (),
        "optimisation",
        "Is the kernel memory bound or compute bound?",
        ("optimisation", "roofline", "memory bound", "compute bound", "intensity"),
        """
Estimate arithmetic intensity = FLOPs / bytes moved. Elementwise ops, softmax, norms and most
reductions are memory bound: reduce passes over memory, fuse, vectorise loads. Matmul and
convolution are compute bound at large sizes: tile for reuse in cache/shared memory and registers.
Optimise for the bound you are under; profiling time per gate tells which part dominates.
""",
    ),
    (
        "opt-avoid-allocs",
        (),
        "optimisation",
        "Avoid allocations and extra passes in forward",
        ("optimisation", "allocation", "temporaries", "passes", "overhead"),
        """
Each temporary tensor costs an allocation and a full memory pass. Allocate the output once
(torch.empty), compute intermediates in registers or a small scratch buffer, and avoid
.contiguous() copies of inputs that are already contiguous. For tiny inputs, launch/call overhead
dominates: fewer, larger kernels win.
""",
    ),
    (
        "opt-refine-one-change",
        (),
        "optimisation",
        "Refine one idea at a time",
        ("refine", "optimisation", "strategy", "profile", "regression"),
        """
When refining a feasible kernel, change one thing per step (tiling, vector width, fusion, thread
count), keep the correct version as the fallback, and compare latency against the best so far. A
refinement that breaks correctness is worth less than no change: re-check edge sizes (not a
multiple of the block) after every change.
""",
    ),
    (
        "opt-loop-unrolling",
        ("cpu", "cuda"),
        "optimisation",
        "Loop unrolling and instruction-level parallelism",
        ("unroll", "ilp", "pragma unroll", "registers", "optimisation"),
        """
`#pragma unroll` (CUDA) or `#pragma GCC unroll 4` (CPU) on short fixed-trip loops removes loop
overhead and lets independent instructions overlap. Combine with multiple accumulators. Unrolling
long loops bloats code and registers; unroll by 4-8 and keep a remainder loop.
""",
    ),
    (
        "activation-numerics",
        (),
        "elementwise",
        "Activation functions: exact formulas",
        ("gelu", "silu", "swish", "tanh", "sigmoid", "activation", "elementwise"),
        """
Match the reference formula: nn.GELU() defaults to the erf form 0.5*x*(1+erf(x/sqrt(2))), not the
tanh approximation (approximate='tanh'). SiLU = x * sigmoid(x). A stable sigmoid is
1/(1+exp(-x)) for x >= 0 and exp(x)/(1+exp(x)) otherwise. Use erff/tanhf/expf from <cmath> on CPU
and device math in CUDA.
""",
    ),
    (
        "cuda-current-stream",
        ("cuda",),
        "pitfalls",
        "CUDA: launch on the current stream; no streams, events or graphs of your own",
        ("stream", "getCurrentCUDAStream", "event", "graph", "synchronize", "cuda", "timing"),
        """
Launch every kernel on `at::cuda::getCurrentCUDAStream()` (pass it as the 4th launch argument:
`k<<<grid, block, smem, at::cuda::getCurrentCUDAStream()>>>`) and return only when the output is
written on that stream. The verifier times with CUDA events on the current stream and compares the
profiler's GPU kernel time across all streams: work on a side stream, torch.cuda.Stream/Event use,
CUDA graph replay or cudaStreamCreate is rejected (rules gpu-stream, cuda-graph, unsynchronised-work).
After a launch, `C10_CUDA_KERNEL_LAUNCH_CHECK();` turns a bad launch configuration into a clear error.
""",
    ),
    (
        "cuda-vectorised-rows",
        ("cuda",),
        "reduction",
        "CUDA row ops: one block per row, float4 loads, warp-shuffle reductions",
        ("softmax", "layernorm", "row", "float4", "warp shuffle", "__shfl_xor_sync", "reduction", "cuda"),
        """
For row-wise softmax/norms: one block (256-1024 threads) per row, each thread strides over the row
with float4 loads when the row length is a multiple of 4 and the pointer is 16-byte aligned, keeps a
running max/sum in registers, reduces within a warp with `__shfl_xor_sync(0xffffffff, v, offset)`
for offsets 16..1, then across warps through a small shared array. Two passes over global memory
(stats, then write) beat three; an online softmax (running max with rescaled sum) needs one read pass.
""",
    ),
    (
        "cuda-smem-tiles-padding",
        ("cuda",),
        "matmul",
        "CUDA matmul: shared-memory tiles with a padded leading dimension",
        ("matmul", "gemm", "tile", "shared memory", "bank conflict", "padding", "register blocking", "cuda"),
        """
Tile A and B into shared memory (e.g. 64x64 tiles, BK=16), pad the inner dimension by one float
(`__shared__ float As[BK][BM + 1]`) to avoid bank conflicts on the transposed reads, and give each
thread a 4x4 or 8x8 register tile of C so each shared load feeds several FMAs. cuBLAS (and at::matmul,
which calls it) is a vendor library standing in for the kernel: the verifier rejects it
(cpp-library / vendor-kernel). Build for the card: extra_cuda_cflags=["-O3", "-arch=sm_90"] on H100.
""",
    ),
    (
        "triton-constexpr-masks",
        ("triton",),
        "launch",
        "Triton: constexpr block sizes, masks on every ragged edge",
        ("triton", "constexpr", "mask", "BLOCK", "num_warps", "num_stages", "grid"),
        """
Declare block sizes as `BLOCK: tl.constexpr` so Triton specialises the kernel; compute offsets with
`tl.arange(0, BLOCK)` and mask every load/store whose index can run past the end
(`tl.load(ptr + offs, mask=offs < n, other=0.0)`). Choose `num_warps` 4-8 for 1-D blocks of 1024 and
`num_stages` 2-4 for pipelined matmul loops; launch with `grid = (triton.cdiv(n, BLOCK),)`.
""",
    ),
    (
        "triton-matmul-precision",
        ("triton",),
        "matmul",
        "Triton matmul: match fp32 torch.matmul with input_precision='ieee'",
        ("triton", "matmul", "tl.dot", "tf32", "precision", "ieee", "grouped ordering"),
        """
`tl.dot` uses TF32 for float32 inputs by default, which can miss atol=rtol=1e-2 on long K; pass
`input_precision="ieee"` (or allow_tf32=False on older Triton) when the reference is fp32. Accumulate
in a float32 `acc = tl.zeros((BM, BN), dtype=tl.float32)`, and order program ids in groups
(GROUP_M) so consecutive programs reuse the same rows of A from L2.
""",
    ),
]
