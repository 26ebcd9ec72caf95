"""How a task's inputs are drawn, so either side can draw them anew on its own device from a seed.

KernelBench's `get_inputs()` builds its tensors on the CPU (`torch.rand(4096, 393216)` at head: 6.4 GB).
Shipping those between processes as files cannot carry today's sizes. Instead the trusted reference
worker reads the *recipe* once — `get_inputs()` run on the meta device (nothing allocated, no random
number drawn) with the factory calls recorded — and every trial and timed call is then drawn where it is
used, on the device, from a seed the parent reveals just before the call. The reference worker and the
candidate's harness draw with the same code (`draw`), so both get bit-identical tensors.

An input whose content a recipe cannot reproduce (a factory result transformed afterwards, a tensor built
from data, a list of labels) makes the whole recipe `None`: that task keeps the file path.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

# Factories whose result is fully described by (shape, dtype, a few scalars) and a generator.
_FACTORIES = {"rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "zeros", "ones",
              "zeros_like", "ones_like", "empty", "empty_like"}
_SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64", "int32": "i32",
          "bool": "bool", "int8": "i8", "uint8": "u8"}


def scaled(scale: float) -> str:
    """The distribution name of the large-magnitude probe at `scale` (`x100`): the task's own inputs, their
    floating tensors multiplied by `scale` (see `verifier.correctness.probes`)."""
    return f"x{float(scale):g}"


def dist_scale(dist: str) -> float | None:
    """`scaled`'s inverse: 100.0 for `x100`, None for any other distribution name."""
    if isinstance(dist, str) and dist.startswith("x"):
        try:
            value = float(dist[1:])
        except ValueError:
            return None
        return value if value > 0 and math.isfinite(value) else None
    return None


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _entry(name: str, args: tuple, kwargs: dict, result) -> dict | None:
    """One recipe entry for a factory call (None when the call cannot be reproduced from a seed)."""
    base = name.removesuffix("_like")
    entry: dict[str, object] = {"kind": base, "shape": [int(s) for s in result.shape], "dtype": _dtype_name(result.dtype)}
    if base == "empty":
        entry["kind"] = "zeros"  # garbage content is not a distribution: drawn as zeros (the task cannot tell)
    if base == "randint":
        rest = args[1:] if name.endswith("_like") else args
        ints = [a for a in rest if isinstance(a, int)]
        low, high = kwargs.get("low"), kwargs.get("high")
        if high is None:
            if len(ints) >= 2 and not name.endswith("_like") and isinstance(args[0], int) and isinstance(args[1], int):
                low, high = ints[0], ints[1]
            elif ints:
                low, high = 0, ints[0]
        if high is None:
            return None
        entry.update(low=int(low or 0), high=int(high))
    return entry


def capture(torch, get_inputs: Callable[[], list]) -> list[dict] | None:
    """The recipe of `get_inputs()`: one entry per argument ({"kind": "rand"|"randn"|"randint"|"zeros"|"ones",
    "shape", "dtype"[, "low", "high"]} for tensors, {"kind": "value", "value": ...} for JSON-able scalars),
    or None when any argument cannot be drawn again from a seed."""
    import json

    from torch.overrides import TorchFunctionMode

    made: dict[int, tuple[Any, dict]] = {}

    class Recorder(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            name = getattr(func, "__name__", "")
            if name in _FACTORIES and isinstance(result, torch.Tensor):
                entry = _entry(name, tuple(args), kwargs, result)
                if entry is not None:
                    made[id(result)] = (result, entry)
            return result

    try:
        with torch.device("meta"), Recorder():
            args = list(get_inputs())
    except Exception:  # a task that cannot run on meta (data-dependent shapes, .numpy(), ...): the file path
        return None
    recipe = []
    for a in args:
        if isinstance(a, torch.Tensor):
            held = made.get(id(a))
            if held is None or held[0] is not a or list(a.shape) != held[1]["shape"]:
                return None
            entry = dict(held[1])
            entry["dtype"] = _dtype_name(a.dtype)
            recipe.append(entry)
        else:
            try:
                json.dumps(a)
            except (TypeError, ValueError):
                return None
            recipe.append({"kind": "value", "value": a})
    return recipe


_GENERATORS: dict = {}  # one generator per device, reseeded by every draw (filled in place)


def _generator(torch, device: str):
    """This process's generator for `device`, made once: `manual_seed` resets its state and offset, so a
    draw from it has the same bits as one from a generator made afresh, and whatever ran between two draws
    (a candidate's forward that reached it, say) cannot carry into the next; only a plain `torch.Generator`
    is used from the cache. Why: a timed GPU round draws its 64 sets inside the clock, and that draw
    jittered the candidate's window by 1.5-4.4 ms against a 0.3 ms signal for a 5 µs kernel (session 23,
    H200); a generator made per set is host work there that reseeding avoids (not yet measured on a card)."""
    key = str(torch.device(device))
    gen = _GENERATORS.get(key)
    if type(gen) is not torch.Generator:  # none yet, or something planted there (a subclass that skips reseeding)
        gen = _GENERATORS[key] = torch.Generator(device=device)
    return gen


def draw(torch, recipe: list[dict], seed: int, dist: str, device: str, into: list | None = None) -> list:
    """The call's arguments drawn on `device` from `seed`: the task's own distribution (`dist="task"`) or
    its floating tensors redrawn as normal / uniform in [-1, 1) / heavy-tailed (same shapes and dtypes), or
    (`dist="x100"`, the large-magnitude probe) the task's own draw with its floating tensors scaled.

    `into`: the previous call's arguments, done with; a tensor of the same shape, dtype and device is drawn
    into in place (the same bits as a fresh draw), so a trial's 256 MB input reuses the last one's pages
    instead of faulting in new ones (about half of a big CPU draw's time; issue 33). The list is emptied as
    it is read (its tensors set to None): one that does not fit is freed before this call's is allocated,
    so a held-out shape of the task's size class never holds the last inputs beside its own."""
    gen = _generator(torch, device).manual_seed(int(seed) & 0x7FFF_FFFF_FFFF_FFFF)
    scale = dist_scale(dist)
    if scale is not None:
        dist = "task"
    out = []
    for k, entry in enumerate(recipe):
        if entry["kind"] == "value":
            out.append(entry["value"])
            continue
        shape, dtype = tuple(entry["shape"]), getattr(torch, entry["dtype"])
        kind = entry["kind"]
        floating = dtype.is_floating_point
        if floating and dist != "task" and kind in ("rand", "randn", "zeros", "ones"):
            kind = {"normal": "randn", "uniform": "uniform", "heavy": "heavy"}[dist]
        old = into[k] if into is not None and k < len(into) else None
        if into is not None and k < len(into):
            into[k] = None  # taken: drawn into below, or freed before this argument is allocated
        buf = (old if isinstance(old, torch.Tensor) and tuple(old.shape) == shape and old.dtype == dtype
               and old.device.type == torch.device(device).type and old.is_contiguous() and old.numel() > 0
               and kind in ("rand", "randn", "uniform", "randint", "zeros", "ones") else None)
        made: dict = {"out": buf} if buf is not None else {"device": device, "dtype": dtype}
        old = None
        if kind == "rand":
            t = torch.rand(shape, generator=gen, **made)
        elif kind == "randn":
            t = torch.randn(shape, generator=gen, **made)
        elif kind == "uniform":
            t = torch.rand(shape, generator=gen, **made).mul_(2).sub_(1)
        elif kind == "heavy":
            t = torch.randn(shape, generator=gen, device=device, dtype=torch.float32)
            t = t.div_(torch.rand(shape, generator=gen, device=device).clamp_min_(0.05)).clamp_(-40, 40).to(dtype)
        elif kind == "randint":
            t = torch.randint(int(entry["low"]), int(entry["high"]), shape, generator=gen, **made)
        elif kind == "zeros":
            t = torch.zeros(shape, **made)
        elif kind == "ones":
            t = torch.ones(shape, **made)
        else:
            raise ValueError(f"unknown input recipe kind {kind!r}")
        if scale is not None and floating:
            t = t.mul_(scale)
        out.append(t)
    return out


def round_seed(seeds: list) -> int:
    """One seed for a whole round's sets (`draw_round`), mixed from all of the round's seeds: as secret as
    they are (the parent draws them and reveals them with the round's command), the same on both sides."""
    import hashlib

    raw = b"".join(int(s & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little") for s in seeds)
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "little") & 0x7FFF_FFFF_FFFF_FFFF


def draw_round(torch, recipe: list[dict], seeds: list, dist: str, device: str) -> list[list]:
    """A timed round's input sets, one per seed: with one seed, `draw` of it; with more, every argument of
    every set drawn at once (one generator call per argument for the whole round, from `round_seed`), set
    k being row k of each. Both sides of the clock draw a round this way (the harness's round and own stub,
    the reference worker's round, replay and stub), so they hold the same bits.

    Why: the sets are drawn inside the clocked window (drawn before it, a candidate would see its inputs
    early). Drawn one by one, 64 small GPU sets cost the host 64 generator seedings and launches per
    argument, and that draw jittered the candidate's window by 1.5-4.4 ms a round on an H200, against
    0.3 ms of calls for a 5 µs kernel (session 23): one launch per argument takes most of that away."""
    if len(seeds) <= 1:
        return [draw(torch, recipe, int(seed), dist, device) for seed in seeds]
    n = len(seeds)
    batched = [entry if entry["kind"] == "value" else {**entry, "shape": [n, *entry["shape"]]} for entry in recipe]
    whole = draw(torch, batched, round_seed([int(s) for s in seeds]), dist, device)
    return [[arg[k] if isinstance(arg, torch.Tensor) else arg for arg in whole] for k in range(n)]


def input_bytes(torch, recipe: list[dict]) -> int:
    """Bytes one call's tensor arguments take (for the memory plan), without drawing them."""
    total = 0
    for entry in recipe:
        if entry["kind"] != "value":
            itemsize = torch.empty((), dtype=getattr(torch, entry["dtype"]), device="meta").element_size()
            total += math.prod(entry["shape"]) * itemsize
    return total


def describe(recipe: list[dict] | None, names: list[str] | None = None) -> str:
    """`x: rand 4096x393216 f32; n: 7` — what the verdict says the inputs were drawn from."""
    if recipe is None:
        return "get_inputs() as written (drawn on the CPU)"
    parts = []
    for i, entry in enumerate(recipe):
        name = names[i] if names and i < len(names) else f"arg{i}"
        if entry["kind"] == "value":
            parts.append(f"{name}: {entry['value']!r}")
            continue
        dims = "x".join(str(s) for s in entry["shape"]) or "scalar"
        kind = entry["kind"] + (f"[{entry['low']},{entry['high']})" if entry["kind"] == "randint" else "")
        parts.append(f"{name}: {kind} {dims} {_SHORT.get(entry['dtype'], entry['dtype'])}")
    return "; ".join(parts)
