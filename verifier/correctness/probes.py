"""Numerics probes of the correctness gate: large-magnitude inputs and held-out shapes.

Ordinary trials draw the task's inputs (and, on request, other distributions of the same size). Wrong
kernels pass there when the inputs are kind to them: a softmax without max subtraction overflows only
for large logits, a kernel that drops the `numel % 4096` tail is right whenever the task's size is a
multiple of 4096. Two probes, run by default after the ordinary trials, as extra trials of the same
trusted path (seeds chosen by the parent, inputs drawn by both sides with `input_recipe.draw`, outputs
compared from files by the parent):

* **Large magnitude** (`VerifyConfig.magnitude_probe`; two scales drawn per verification from its secret
  generator, log-uniform over `SCALE_RANGE` = [30, 3e4], one in each half; `magnitude_scales` fixes them
  for an experiment): the task's own draw with its floating tensors multiplied by the scale
  (distribution `x137`).
  Where the reference's outputs are all finite, the candidate's must be finite and close under the
  magnitude-relative tolerance of `compare.compare_tensor(magnitude=True)`; where the reference itself
  is not finite (or raises) the probe is skipped and the verdict says so.
* **Held-out shapes** (`VerifyConfig.shape_probe`): up to three variants of the recipe's sizes chosen to
  leave tails (`shape_variants`), all drawn per verification from the probe trial's secret seed: every
  size above 4 made a smaller odd size, a multiple of 64 plus a small prime tail (no power-of-two block
  divides it, and it is prime only by chance), and the leading size of each tensor alone made one
  (models with fixed feature sizes still take it), each within an
  element budget drawn log-uniform from `DRAWN_FLOOR` up to the task's own size; and
  (`_drawn_size_class`) the task's own size class with odd sizes (all prime in about a quarter of
  verifications, drawn: never a sign of a probe), grown
  past 2^20 elements when the task is smaller (a fast path's tail bug lives above such thresholds). The reference runs a variant first;
  where it raises, or returns outputs of another count, rank or dtype than on the task's shapes, the
  variant is skipped. A candidate that raises on a variant is not refused (an honest kernel may
  TORCH_CHECK its shapes): the verdict notes that it handles only the task's shapes. A wrong answer on a
  variant is refused, naming the shapes.

Every probe is recorded (`record`) with its status: pass, fail, skip (and why), refused (the candidate
raised on a held-out shape) or off (switched off); the correctness gate's detail keeps the list under
`probes`, and `VerificationResult.probes` carries it to the app and the benchmark.
"""

from __future__ import annotations

import math

SCALE_RANGE = (30.0, 3.0e4)  # the magnitude probe's scales are drawn log-uniform over this range...
SCALE_DRAWS = 2  # ...this many per verification (`drawn_scales`), unless the config fixes them
SHAPE_VARIANTS = 3
SHAPE_BUDGET = 1 << 18  # elements per tensor in a held-out shape (1 MB of float32)
LARGE_FLOOR = (1 << 20) + 1  # the drawn variant's largest tensor reaches past every usual fast-path threshold
LARGE_BUDGET = 1 << 23  # ... but never past the task's own size or this (32 MB of float32), whichever is larger
KEEP_BELOW = 5  # sizes under this (channels, pairs, heads of 4) are kept in the "every size" variant

MAGNITUDE, SHAPE = "magnitude", "shape"


def drawn_scales(rng, count: int = SCALE_DRAWS, lo: float = SCALE_RANGE[0], hi: float = SCALE_RANGE[1]) -> list[float]:
    """`count` magnitude scales drawn from `rng` (the verification's secret generator), log-uniform over
    [lo, hi] split into `count` equal strata, one draw in each (so one scale is always in the upper part
    of the range), each rounded to three significant digits (the distribution's name, `x137`, carries it
    to both sides exactly). A kernel cannot tell a probe from a task input by its scale: ×100 and ×10000
    every time let a softmax keep its max subtraction for rows whose spread looked like theirs."""
    a, b = math.log(lo), math.log(hi)
    step = (b - a) / max(1, count)
    return [float(f"{math.exp(a + step * (i + rng.random())):.3g}") for i in range(count)]


def probe_trials(config, rng=None) -> list[dict]:
    """The extra trials `config` asks for, in order (magnitude probes, then held-out shapes): each
    {"probe": kind, "dist", "name"[, "variant"]}; the parent adds the seed and the trusted directory.
    The magnitude scales are `config.magnitude_scales` when given, else drawn from `rng` (`drawn_scales`;
    a fresh secret generator when None)."""
    out: list[dict] = []
    if getattr(config, "magnitude_probe", True):
        from verifier.correctness.input_recipe import scaled

        scales = getattr(config, "magnitude_scales", None)
        if not scales:
            if rng is None:
                import random
                import secrets

                rng = random.Random(secrets.randbits(64))
            scales = drawn_scales(rng)
        for scale in scales:
            if not (isinstance(scale, (int, float)) and math.isfinite(scale) and scale > 0):
                continue
            out.append({"probe": MAGNITUDE, "dist": scaled(scale), "name": f"inputs x{float(scale):g}"})
    if getattr(config, "shape_probe", True):
        for k in range(SHAPE_VARIANTS):
            out.append({"probe": SHAPE, "dist": "task", "variant": k, "name": f"held-out shapes #{k + 1}"})
    return out


def off_records(config) -> list[dict]:
    """Records of the probes `config` switched off (the verdict says so)."""
    out = []
    if not getattr(config, "magnitude_probe", True):
        out.append({"probe": MAGNITUDE, "name": "large-magnitude inputs", "status": "off",
                    "reason": "switched off (--no-magnitude-probe)"})
    if not getattr(config, "shape_probe", True):
        out.append({"probe": SHAPE, "name": "held-out shapes", "status": "off",
                    "reason": "switched off (--no-shape-probe)"})
    return out


# ------------------------------------------------------------------------------------------ shapes
def prev_prime(n: int) -> int:
    """The largest prime <= n (2 for n < 3)."""
    n = int(n)
    if n < 3:
        return 2
    while n > 2:
        if n % 2 and all(n % d for d in range(3, math.isqrt(n) + 1, 2)):
            return n
        n -= 1
    return 2


def _tensors(recipe: list[dict]) -> list[dict]:
    return [e for e in recipe if e.get("kind") != "value"]


def _apply(recipe: list[dict], resize) -> list[dict]:
    out = []
    for e in recipe:
        if e.get("kind") == "value":
            out.append(dict(e))
        else:
            out.append({**e, "shape": [int(s) for s in resize(e["shape"])]})
    return out


def shapes_label(recipe: list[dict]) -> str:
    """`509x509` (tensors joined by `, `): how the verdict names a held-out shape."""
    return ", ".join("x".join(str(s) for s in e["shape"]) or "scalar" for e in _tensors(recipe))


DRAWN_FLOOR = 1 << 12  # the smallest element budget drawn for held-out shapes #1 and #2


def _drawn_budget(rng, own: int) -> int:
    """An element budget for held-out shapes #1 and #2, log-uniform from DRAWN_FLOOR up to the task's own
    largest tensor (`own`, never past LARGE_BUDGET): small shapes and the task's own size class alike."""
    hi = max(DRAWN_FLOOR, min(int(own), max(LARGE_BUDGET, SHAPE_BUDGET)))
    return int(math.exp(rng.uniform(math.log(DRAWN_FLOOR), math.log(hi))))


TAIL_BLOCK = 64  # a drawn held-out size is a multiple of this plus a small odd prime tail
TAIL_PRIMES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61)
PRIME_SHARE = 0.25  # held-out shape #3 is all prime sizes in about this share of verifications


def _tailed(rng, lo: int, hi: int) -> int:
    """An odd size drawn in [lo, hi] (lo when the range is empty): above TAIL_BLOCK a multiple of it plus a
    prime tail from TAIL_PRIMES, so no power-of-two block divides it and it is prime only by chance (a
    kernel cannot take "a prime size" for "a probe"); below, any odd size."""
    lo, hi = max(1, int(lo)), max(1, int(hi))
    if hi <= lo:
        return lo
    u = rng.randint(lo, hi)
    if u > TAIL_BLOCK:
        size = u - u % TAIL_BLOCK + rng.choice(TAIL_PRIMES)
        while size > hi and size - TAIL_BLOCK >= lo:
            size -= TAIL_BLOCK
        if lo <= size <= hi:
            return size
    if u % 2:
        return u
    return u + 1 if u + 1 <= hi else u - 1 if u - 1 >= lo else u


def _size_below(rng, v: int, taken=(), floor: int = 2) -> int:
    """A size drawn within 1/32 below `v` (`_tailed`; `floor` at least where `v` leaves room), one not in
    `taken` where there is one."""
    m = floor
    for _ in range(32):
        m = _tailed(rng, max(floor, v - max(2, v // 32)), max(floor, v - 1))
        if m not in taken:
            break
    return m


def _every_size(recipe: list[dict], rng) -> list[dict] | None:
    """Every size >= KEEP_BELOW made an odd size drawn from `rng` (`_tailed`; equal sizes alike, a matmul's
    shared K stays shared), just below the task's size at first, then the largest shrunk (drawn, sizes that
    differed kept different where they can be) until every tensor is within a budget drawn from `rng`
    (`_drawn_budget`: from a few thousand elements up to the task's own size class)."""
    tensors = _tensors(recipe)
    sizes = sorted({int(s) for e in tensors for s in e["shape"] if int(s) >= KEEP_BELOW})
    if not sizes:
        return None
    own = max((math.prod(int(s) for s in e["shape"]) for e in tensors), default=0)
    budget = _drawn_budget(rng, own)
    mapping: dict[int, int] = {}
    for v in sizes:
        mapping[v] = _size_below(rng, v, set(mapping.values()), floor=3)

    def numels() -> int:
        return max((math.prod(mapping.get(int(s), int(s)) for s in e["shape"]) for e in tensors), default=0)

    while numels() > budget:
        top = max(mapping.values())
        others = {m for m in mapping.values() if m != top}
        smaller = 2
        for _ in range(32):
            smaller = _tailed(rng, max(3, top // 3), max(3, top // 2))
            if smaller not in others:
                break
        if smaller >= top:
            return None
        mapping = {v: (smaller if m == top else m) for v, m in mapping.items()}
    return _apply(recipe, lambda shape: [mapping.get(int(s), int(s)) for s in shape])


def next_prime(n: int) -> int:
    """The smallest prime >= n."""
    n = max(2, int(n))
    while prev_prime(n) != n:
        n += 1
    return n


def _drawn_size_class(recipe: list[dict], seed: int) -> list[dict] | None:
    """The task's own size class with odd tails, drawn from the verification's secret `seed` (issue 37:
    fixed small primes let a kernel recognise a probe, and a fast path taken only above ~2^20 elements
    was never probed). Every size >= KEEP_BELOW becomes an odd size drawn just below it (within 1/32)
    (equal sizes alike, sizes that differed stay different); then, while the largest tensor holds fewer
    than LARGE_FLOOR elements, the leading sizes grow (to a drawn odd size) so that it is past every usual
    size threshold; never past the task's own largest tensor or LARGE_BUDGET, whichever is larger. The
    sizes are all prime in about PRIME_SHARE of verifications (drawn from the seed), else a multiple of
    TAIL_BLOCK plus a prime tail (`_tailed`), prime only by chance: "all sizes prime" no longer means
    "this is held-out shape #3", and a kernel that is right only on prime sizes can still be caught."""
    import random

    rng = random.Random(int(seed))
    tensors = _tensors(recipe)
    sizes = sorted({int(s) for e in tensors for s in e["shape"] if int(s) >= KEEP_BELOW})
    if not sizes:
        return None
    own = max((math.prod(int(s) for s in e["shape"]) for e in tensors), default=0)
    cap = max(own, LARGE_BUDGET)
    all_prime = rng.random() < PRIME_SHARE

    def pick(lo: int, hi: int) -> int:
        return prev_prime(rng.randint(lo, hi)) if all_prime else _tailed(rng, lo, hi)

    mapping: dict[int, int] = {}
    for v in sizes:
        spread = max(2, v // 32)
        for _ in range(64):
            m = pick(max(KEEP_BELOW, v - spread), v)
            if m >= KEEP_BELOW and m not in mapping.values():
                break
        mapping[v] = m

    def numel(e, lead=None) -> int:
        shape = [mapping.get(int(s), int(s)) for s in e["shape"]]
        if lead is not None and len(shape) >= 1:
            shape[0] = lead
        return math.prod(shape)

    big = max(tensors, key=lambda e: numel(e))
    if numel(big) < LARGE_FLOOR and len(big["shape"]) >= 1:
        rest = max(1, numel(big) // max(1, mapping.get(int(big["shape"][0]), int(big["shape"][0]))))
        lead0 = int(big["shape"][0])
        need = -(-LARGE_FLOOR // rest)
        want = next_prime(need + rng.randint(0, 64)) if all_prime else _tailed(rng, need, need + 2 * TAIL_BLOCK)
        if want * rest <= cap and lead0 >= KEEP_BELOW:
            mapping[lead0] = want
    if any(numel(e) > cap for e in tensors):
        return None
    return _apply(recipe, lambda shape: [mapping.get(int(s), int(s)) for s in shape])


def _leading_size(recipe: list[dict], rng) -> list[dict] | None:
    """The first size of every tensor of rank >= 2 made an odd size drawn from `rng` (equal leading sizes
    alike), the rest kept: a batch of another size, which models with fixed feature sizes still take. The
    batch is as large as a budget drawn from `rng` allows (`_drawn_budget`), never the task's own."""
    lead = [e for e in _tensors(recipe) if len(e["shape"]) >= 2]
    if not lead:
        return None
    rest = max(math.prod(int(s) for s in e["shape"][1:]) for e in lead)
    own = max(math.prod(int(s) for s in e["shape"]) for e in _tensors(recipe))
    budget = _drawn_budget(rng, own)
    mapping: dict[int, int] = {}
    for v in sorted({int(e["shape"][0]) for e in lead}):
        if v < 3:
            return None
        hi = max(3, min(v - 1, budget // max(1, rest)))
        mapping[v] = _size_below(rng, hi + 1, set(mapping.values()), floor=3)
    return _apply(recipe, lambda shape: ([mapping.get(int(shape[0]), int(shape[0])), *shape[1:]]
                                         if len(shape) >= 2 else list(shape)))


def shape_variants(recipe: list[dict] | None, seed: int = 0) -> list[dict]:
    """The held-out shapes of a recipe, in order: {"recipe", "label"} or {"skip": why}. Deterministic for a
    `seed` (the trusted reference worker passes the probe trial's secret seed, which every variant is
    drawn from: #1 `_every_size` and #2 `_leading_size` over budgets from a few thousand elements to the
    task's own size class, #3 `_drawn_size_class` in that class and past 2^20 elements, all prime
    only in about PRIME_SHARE of seeds)."""
    if recipe is None:
        return [{"skip": "the task's inputs are not drawn from a recipe (get_inputs() transforms them), so "
                         "their sizes cannot be changed"}] * SHAPE_VARIANTS
    original = shapes_label(recipe)
    out: list[dict] = []
    seen = {original}
    import random

    # each variant from its own stream of the seed: #1 and #2 drawn too (issue 37: fixed small primes let a
    # kernel recognise a probe); #3 keeps `random.Random(seed)`
    for make, what in ((lambda r: _every_size(r, random.Random(f"every-size:{int(seed)}")),
                        "no size of 5 or more to change"),
                       (lambda r: _leading_size(r, random.Random(f"leading-size:{int(seed)}")),
                        "no tensor of rank 2 or more with a leading size of 3 or more"),
                       (lambda r: _drawn_size_class(r, seed), "no size of 5 or more to change, or too large")):
        variant = make(recipe)
        if variant is None:
            out.append({"skip": what})
            continue
        label = shapes_label(variant)
        if label in seen:
            out.append({"skip": f"the same shapes as another probe ({label})"})
            continue
        seen.add(label)
        out.append({"recipe": variant, "label": label})
    return out


def outputs_consistent(task_outputs: list[dict], outputs: list[dict]) -> str | None:
    """Why the reference's outputs on a held-out shape cannot be compared (another count, rank or dtype
    than on the task's shapes, or empty where they were not), or None when they can."""
    if len(task_outputs) != len(outputs):
        return f"the reference returned {len(outputs)} outputs there, {len(task_outputs)} on the task's shapes"
    for j, (a, b) in enumerate(zip(task_outputs, outputs, strict=True)):
        if len(a["shape"]) != len(b["shape"]) or a["dtype"] != b["dtype"]:
            return (f"the reference's output {j} is {b['dtype']} {list(b['shape'])} there, "
                    f"{a['dtype']} {list(a['shape'])} on the task's shapes")
        if math.prod(b["shape"]) == 0 and math.prod(a["shape"]) != 0:
            return f"the reference's output {j} is empty there"
    return None


NONFINITE_BLOCK = 1 << 20  # elements per block of `nonfinite_reason`


def nonfinite_reason(torch, outs: list) -> str | None:
    """`12 of 4096 outputs are inf or nan` when the reference's outputs are not all finite, else None."""
    bad = total = 0
    for o in outs:
        if o.is_floating_point() or o.is_complex():
            # block by block, counted with `count_nonzero`: `isfinite` makes a full-size `abs` and a bool's
            # `sum` widens it to int64 (about 3x a float32 output in the trusted worker's memory; issue 33)
            flat = o.detach().reshape(-1)
            for i in range(0, flat.numel(), NONFINITE_BLOCK):
                bad += int(torch.count_nonzero(~torch.isfinite(flat[i:i + NONFINITE_BLOCK])))
        total += o.numel()
    return f"the reference is not finite there ({bad} of {total} outputs inf or nan)" if bad else None


# ------------------------------------------------------------------------------------------ records
def record(trial: dict, status: str, reason: str = "") -> dict:
    """One probe's line in the verdict."""
    rec = {"probe": trial.get("probe"), "name": trial.get("name", ""), "status": status, "reason": reason}
    if trial.get("label"):
        rec["shapes"] = trial["label"]
    return rec


def notes(records: list[dict]) -> list[str]:
    """The verdict's notes on the probes: what was skipped or switched off and why, and a kernel that
    handles only the task's shapes."""
    out = []
    refused = [r for r in records if r.get("status") == "refused"]
    if refused:
        shapes = "; ".join(r.get("shapes") or r["name"] for r in refused)
        out.append(f"handles only the task's shapes: the kernel raised on held-out shapes {shapes} "
                   f"({refused[0]['reason']})")
    for r in records:
        if r.get("status") in ("skip", "off"):
            out.append(f"probe {r['name']} {'skipped' if r['status'] == 'skip' else 'off'}: {r['reason']}")
    return out


def summary(records: list[dict]) -> str:
    """`inputs x100 pass, inputs x10000 skip, shapes 509x509 pass, shapes 61x4096 refused`: one line for the
    command line and the app ("" when no probe is recorded)."""
    parts = []
    for r in records:
        name = f"shapes {r['shapes']}" if r.get("shapes") else r.get("name", "?")
        parts.append(f"{name} {r.get('status', '?')}")
    return ", ".join(parts)
