"""Child-process probe for one KernelBench-format task file.

Run as `python -I task_probe.py FILENAME [--estimate] [--degenerate PRESET]` with the task source on
stdin. It executes the task (which may hang, crash or allocate wildly, hence the separate process),
builds the model, runs one forward pass and prints a single JSON line: either {"ok": true,
...shapes...} or {"ok": false, "error": "<one line>"}.

`--estimate` runs nothing for real: the task runs on the `meta` device (shapes and dtypes only, no
memory), and the memory the reference needs is counted from the tensors it would allocate
(`estimate_memory`). `--degenerate PRESET` also runs the reference on other inputs and other weights
and reports which trivial answers would pass (verifier/correctness/compare.py's `degenerate_answers`, loaded by
path). It imports nothing from this project by module name, so that `-I` isolation works.
"""

from __future__ import annotations

import importlib.util
import json
import math
import statistics
import sys
import time
import traceback
import weakref
from pathlib import Path

MAX_REASON = 240


def _one_line(exc: BaseException) -> str:
    """`TypeError: message` squeezed to one short line."""
    text = " ".join(str(exc).split()) or "(no message)"
    if len(text) > MAX_REASON:
        text = text[: MAX_REASON - 3] + "..."
    return f"{type(exc).__name__}: {text}"


def _task_line(exc: BaseException, filename: str) -> int | None:
    """Deepest line number inside the task file in the exception's traceback."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename == filename:
            line = frame.lineno
    return line


def _where(exc: BaseException, filename: str) -> str:
    line = _task_line(exc, filename)
    return f" (line {line})" if line else ""


def _describe(value: object) -> dict | None:
    """Shape/dtype record for a tensor, or None for anything else."""
    import torch

    if not isinstance(value, torch.Tensor):
        return None
    return {"shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}


class ProbeError(Exception):
    """A task problem, already phrased for the person reading it."""


def _call(what: str, fn, filename: str):
    try:
        return fn()
    except Exception as exc:
        raise ProbeError(f"{what} raised {_one_line(exc)}{_where(exc, filename)}") from None


def _on(device: str):
    """Where the probe runs the task: factory calls without a device allocate there (a KernelBench
    problem's gigabyte-sized inputs are drawn on the GPU it will be verified on, not in host memory)."""
    import contextlib

    import torch

    return torch.device(device) if device != "cpu" else contextlib.nullcontext()


def _to(value, device: str):
    import torch

    if device == "cpu":
        return value
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, list | tuple):
        return type(value)(_to(v, device) for v in value)
    return value


def _module_to(model, device: str):
    """The model on `device` (its parameters and buffers); on the CPU, or for a model that is not a
    torch module, as it is."""
    return model.to(device) if device != "cpu" and hasattr(model, "to") else model


def _sync(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()


def _probe(source: str, filename: str, device: str = "cpu") -> dict:
    import torch

    namespace = _exec_task(source, filename)
    model_cls = namespace["Model"]

    torch.manual_seed(0)
    with _on(device):
        return _probe_on(namespace, model_cls, filename, device)


def _probe_on(namespace: dict, model_cls, filename: str, device: str) -> dict:
    import torch

    init_args = _call("get_init_inputs()", namespace["get_init_inputs"], filename)
    if not isinstance(init_args, list | tuple):
        raise ProbeError(f"get_init_inputs() returned {type(init_args).__name__}; it must return a list")
    inputs = _call("get_inputs()", namespace["get_inputs"], filename)
    if not isinstance(inputs, list | tuple):
        raise ProbeError(f"get_inputs() returned {type(inputs).__name__}; it must return a list of tensors")
    inputs = _to(list(inputs), device)
    specs = [_describe(x) for x in inputs]
    for i, (value, spec) in enumerate(zip(inputs, specs, strict=True)):
        if spec is None:
            raise ProbeError(
                f"get_inputs() item {i} is {type(value).__name__}, not a torch.Tensor; "
                "pass constants through get_init_inputs() instead"
            )

    try:
        model = _module_to(model_cls(*init_args), device)
    except Exception as exc:
        raise ProbeError(
            f"Model(*get_init_inputs()) failed with {_one_line(exc)}{_where(exc, filename)}; "
            "check that get_init_inputs() matches Model.__init__"
        ) from None

    with torch.no_grad():
        out = _call("Model.forward(*get_inputs())", lambda: model(*inputs), filename)
        times = []
        for _ in range(3):
            _sync(device)
            start = time.perf_counter()
            model(*inputs)
            _sync(device)
            times.append((time.perf_counter() - start) * 1000.0)

    outputs = list(out) if isinstance(out, list | tuple) else [out]
    out_specs = [_describe(o) for o in outputs]
    if not outputs or any(s is None for s in out_specs):
        raise ProbeError(f"Model.forward returned {type(out).__name__}; it must return a tensor")
    return {
        "ok": True,
        "inputs": specs,
        "init_args": [repr(a)[:80] for a in init_args],
        "outputs": out_specs,
        "reference_ms": statistics.median(times),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def _nbytes(t) -> int:
    return int(t.numel()) * int(t.element_size())


def _tensors(value) -> list:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def estimate_memory(namespace: dict, filename: str = "<task>") -> dict:
    """The memory one reference run needs, in bytes, found without allocating: the task's model and inputs
    are built on the `meta` device and forward runs there under a dispatch mode that adds up every tensor
    an operator creates and subtracts it when it is freed.

    Returns {"bytes": weights + inputs + peak of forward (outputs included), "weights_bytes",
    "inputs_bytes", "peak_bytes", "outputs_bytes", "inputs": [...], "outputs": [...]}. Raises ProbeError
    when the task cannot run on `meta` (an operator without a meta kernel, or data-dependent shapes).
    """
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live = self.peak = 0

        def _free(self, n: int) -> None:
            self.live -= n

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            returns = func._schema.returns
            outs = out if isinstance(out, list | tuple) else [out]
            for ret, t in zip(returns, outs, strict=False):
                if isinstance(t, torch.Tensor) and ret.alias_info is None:  # views and in-place results are not new memory
                    n = _nbytes(t)
                    self.live += n
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(t, self._free, n)
            return out

    model_cls, get_inputs, get_init_inputs = namespace["Model"], namespace["get_inputs"], namespace["get_init_inputs"]
    with torch.device("meta"):
        init_args = _call("get_init_inputs()", get_init_inputs, filename)
        inputs = _call("get_inputs()", get_inputs, filename)
        try:
            model = model_cls(*init_args)
        except Exception as exc:
            raise ProbeError(f"Model(*get_init_inputs()) failed on the meta device with {_one_line(exc)}") from None
    inputs_list = _tensors(inputs)
    weights = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    counter = Counter()
    with torch.no_grad(), counter:
        try:
            out = model(*inputs)
        except Exception as exc:
            raise ProbeError(f"forward cannot run on the meta device ({_one_line(exc)})") from None
    outputs = _tensors(out)
    weights_bytes = sum(_nbytes(t) for t in weights.values())
    inputs_bytes = sum(_nbytes(t) for t in inputs_list)
    return {
        "bytes": weights_bytes + inputs_bytes + counter.peak,
        "weights_bytes": weights_bytes,
        "inputs_bytes": inputs_bytes,
        "peak_bytes": counter.peak,
        "outputs_bytes": sum(_nbytes(t) for t in outputs),
        "inputs": [_describe(t) for t in inputs_list],
        "outputs": [_describe(t) for t in outputs],
        "init_args": [repr(a)[:80] for a in init_args],
    }


def _exec_task(source: str, filename: str) -> dict:
    namespace: dict = {"__name__": "__evokernel_task__", "__file__": filename}
    code = compile(source, filename, "exec")
    _call("importing the task file", lambda: exec(code, namespace), filename)
    if not isinstance(namespace.get("Model"), type):
        raise ProbeError("`Model` is not a class after running the file; define class Model(nn.Module)")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(namespace.get(name)):
            raise ProbeError(f"`{name}` is not a function after running the file; define def {name}()")
    return namespace


def _stay_on_meta():
    """A torch-function mode that keeps everything on the meta device: `.cuda()`, `.to("cuda")` and
    `device=` arguments (KernelBench files often move inputs to the GPU) change nothing but the dtype."""
    import torch
    from torch.overrides import TorchFunctionMode

    def is_device(a) -> bool:
        return isinstance(a, str | torch.device) or (isinstance(a, int) and not isinstance(a, bool))

    class StayOnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            name = getattr(func, "__name__", "")
            if "device" in kwargs:
                kwargs["device"] = "meta"
            if args and isinstance(args[0], torch.Tensor):
                if name in ("cuda", "cpu", "pin_memory"):
                    return args[0]
                if name == "to":
                    rest = [a for a in args[1:] if not is_device(a)]
                    kwargs.pop("device", None)
                    if not rest and not kwargs:
                        return args[0]
                    args = (args[0], *rest)
            return func(*args, **kwargs)

    return StayOnMeta()


def _estimate(source: str, filename: str) -> dict:
    import torch

    with torch.device("meta"), _stay_on_meta():
        namespace = _exec_task(source, filename)
        return {"ok": True, **estimate_memory(namespace, filename)}


def _estimate_batch(payload: str) -> None:
    """Stdin holds a JSON list of {"filename", "source"}; one JSON line per task, in order, torch imported once."""
    for item in json.loads(payload):
        try:
            result = _estimate(item["source"], item["filename"])
        except ProbeError as exc:
            result = {"ok": False, "error": str(exc)}
        except Exception as exc:  # one broken task must not hide the others' estimates
            result = {"ok": False, "error": _one_line(exc)}
        sys.stdout.write("\n" + json.dumps({"filename": item["filename"], **result}) + "\n")
        sys.stdout.flush()


def _compare_module():
    return _verifier_module("correctness", "compare")


def _verifier_module(room: str, name: str):
    """verifier/ROOM/NAME.py loaded by path (the probe runs under `-I` and imports nothing of ours by name)."""
    path = Path(__file__).resolve().parents[1] / "verifier" / room / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_evokernel_{name}", path)
    assert spec is not None and spec.loader is not None  # a .py path always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


#: Above this many elements a tensor is compared through a crop: evenly spaced indices along every
#: dimension (the same for every tensor of one shape, so an input and an output of one shape line up),
#: at most this many elements in all. What the degeneracy checks test (zeros, a constant, the mean along
#: an axis, another trial's outputs, an input passed through) is a property of the values' distribution,
#: not of the size, and a gigabyte-sized task then costs the probe megabytes of host memory, not gigabytes.
CROP_ELEMENTS = 1 << 22


def crop(t, limit: int = CROP_ELEMENTS):
    """`t` itself when small, else the sub-tensor at evenly spaced indices along each dimension, with
    the longest dimensions thinned first until at most `limit` elements remain."""
    import torch

    if t.numel() <= limit or t.dim() == 0:
        return t
    keep = list(t.shape)
    while math.prod(keep) > limit:
        d = max(range(len(keep)), key=lambda i: keep[i])
        keep[d] = max(1, keep[d] // 2)
    for d, (n, k) in enumerate(zip(t.shape, keep, strict=True)):
        if k < n:
            index = torch.linspace(0, n - 1, k, device=t.device).round().long()
            t = t.index_select(d, index)
    return t


def _outputs_np(out) -> list:
    import torch

    arrays = []
    for t in _tensors(out):
        if isinstance(t, torch.Tensor):
            t = crop(t.detach())
            arrays.append(t.cpu().float().numpy() if t.is_floating_point() else t.cpu().numpy())
    return arrays


SEPARATING = ("normal", "uniform")  # distributions tried when an input passed through passes the task's own


def _degenerate(source: str, filename: str, preset: str, seeds: tuple[int, ...] = (1, 2, 3),
                device: str = "cpu") -> tuple[list[str], list[str]]:
    """Which trivial answers pass for this task under `preset` (reference outputs on several inputs, and on
    the first inputs with weights drawn from another seed), and, when an input handed back unchanged
    passes, the input distributions under which none does (with finite reference outputs): the verifier
    adds those to its trials so a copy of the input fails there."""

    namespace = _exec_task(source, filename)
    compare = _compare_module()
    with _on(device):
        return _degenerate_on(namespace, compare, preset, seeds, device)


def _degenerate_on(namespace: dict, compare, preset: str, seeds: tuple[int, ...], device: str):
    import torch

    init_args = namespace["get_init_inputs"]()
    torch.manual_seed(0)
    model = _module_to(namespace["Model"](*init_args), device)
    atol, rtol = (1e-2, 1e-2) if preset in ("v0", "paper") else (None, None)

    def run(draw) -> tuple[list, list, list]:
        trials, ins = [], []
        dtypes: list[str] = []
        for seed in seeds:
            inputs = draw(seed)
            out = model(*inputs)
            dtypes = dtypes or [str(t.dtype).removeprefix("torch.") for t in _tensors(out)]
            trials.append(_outputs_np(out))
            ins.append(_outputs_np(inputs))
        return trials, ins, dtypes

    def task_draw(seed: int) -> list:
        torch.manual_seed(seed)
        return _to(list(namespace["get_inputs"]()), device)

    with torch.no_grad():
        trials, inputs, dtypes = run(task_draw)
        torch.manual_seed(12345)
        other = _module_to(namespace["Model"](*init_args), device)
        first = task_draw(seeds[0])
        reweighted = _outputs_np(other(*first)) if list(other.parameters()) else None
        found = compare.degenerate_answers(trials, dtypes, atol=atol, rtol=rtol, reweighted=reweighted, inputs=inputs)
        separating = []
        if any(compare.is_pass_through(f) for f in found):
            draw_inputs = _verifier_module("workers", "reference_worker").draw_inputs
            task = type("Task", (), {"get_inputs": staticmethod(namespace["get_inputs"])})
            for dist in SEPARATING:
                d_trials, d_inputs, d_dtypes = run(lambda seed, d=dist: draw_inputs(torch, task, seed, d, device))
                finite = all(bool(torch.isfinite(torch.as_tensor(o)).all()) for t in d_trials for o in t
                             if o.dtype.kind == "f")
                if finite and not compare.pass_throughs(d_trials, d_inputs, d_dtypes, atol=atol, rtol=rtol):
                    separating.append(dist)
    return found, separating


def main() -> None:
    args = sys.argv[1:]
    filename = args[0] if args and not args[0].startswith("--") else "<task>"
    source = sys.stdin.read()
    if "--estimate-batch" in args:
        _estimate_batch(source)
        return
    try:
        if "--estimate" in args:
            result = _estimate(source, filename)
        else:
            device = args[args.index("--device") + 1] if "--device" in args[:-1] else "cpu"
            if device != "cpu":
                import torch

                if not torch.cuda.is_available():
                    raise ProbeError(f"the task checks were asked to run on {device}, and torch sees no GPU here")
            result = _probe(source, filename, device)
            if "--degenerate" in args:
                preset = args[args.index("--degenerate") + 1] if len(args) > args.index("--degenerate") + 1 else "kernelbench"
                result["degenerate"], result["separating"] = _degenerate(source, filename, preset, device=device)
    except ProbeError as exc:
        result = {"ok": False, "error": str(exc)}
    except SyntaxError as exc:
        result = {"ok": False, "error": f"syntax error at line {exc.lineno}: {exc.msg}"}
    except ImportError as exc:
        result = {"ok": False, "error": f"could not import: {_one_line(exc)}"}
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
