"""Child-process probe for one KernelBench-format task file.

Run as `python -I task_probe.py FILENAME` with the task source on stdin. It executes the task
(which may hang, crash or allocate wildly, hence the separate process), builds the model, runs one
forward pass and prints a single JSON line: either {"ok": true, ...shapes...} or
{"ok": false, "error": "<one line>"}. It imports nothing from this project so that `-I` isolation
works.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import traceback

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


def _probe(source: str, filename: str) -> dict:
    import torch

    namespace: dict = {"__name__": "__evokernel_task__", "__file__": filename}
    code = compile(source, filename, "exec")
    _call("importing the task file", lambda: exec(code, namespace), filename)
    model_cls = namespace.get("Model")
    if not isinstance(model_cls, type):
        raise ProbeError("`Model` is not a class after running the file; define class Model(nn.Module)")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(namespace.get(name)):
            raise ProbeError(f"`{name}` is not a function after running the file; define def {name}()")

    torch.manual_seed(0)
    init_args = _call("get_init_inputs()", namespace["get_init_inputs"], filename)
    if not isinstance(init_args, list | tuple):
        raise ProbeError(f"get_init_inputs() returned {type(init_args).__name__}; it must return a list")
    inputs = _call("get_inputs()", namespace["get_inputs"], filename)
    if not isinstance(inputs, list | tuple):
        raise ProbeError(f"get_inputs() returned {type(inputs).__name__}; it must return a list of tensors")
    specs = [_describe(x) for x in inputs]
    for i, (value, spec) in enumerate(zip(inputs, specs, strict=True)):
        if spec is None:
            raise ProbeError(
                f"get_inputs() item {i} is {type(value).__name__}, not a torch.Tensor; "
                "pass constants through get_init_inputs() instead"
            )

    try:
        model = model_cls(*init_args)
    except Exception as exc:
        raise ProbeError(
            f"Model(*get_init_inputs()) failed with {_one_line(exc)}{_where(exc, filename)}; "
            "check that get_init_inputs() matches Model.__init__"
        ) from None

    with torch.no_grad():
        out = _call("Model.forward(*get_inputs())", lambda: model(*inputs), filename)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            model(*inputs)
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


def main() -> None:
    filename = sys.argv[1] if len(sys.argv) > 1 else "<task>"
    source = sys.stdin.read()
    try:
        result = _probe(source, filename)
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
