"""The trusted side of a verification: the task's reference `Model`, in a process of its own.

`python -m verifier.workers.reference_worker` loads nothing until told to; the parent keeps one per task warm.
It draws inputs from the seeds the parent chose fresh for this verification, runs the reference,
and writes outputs (for the comparison) as files. A task whose `get_inputs()` a recipe can reproduce
(`verifier.correctness.input_recipe`) has its inputs drawn from the seeds on the device by both sides, so no input
is written; any other task's inputs are written as files for the candidate (`draw_inputs`). It times the
reference with exactly the candidate's code path (`verifier.clock.paired_calls.time_round`), in rounds that the
parent interleaves with the candidate's. It never sees candidate code.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

DISTRIBUTIONS = ("task", "normal", "uniform", "heavy")
#: the FLOP count takes one more forward: not for a task whose call moves more than this (a gigabyte ReLU's
#: second output would take the room the candidate needs on the card); its FLOPs are then unknown
FLOP_COUNT_MAX_BYTES = 1 << 30


def _load_task(path: str):
    from verifier.build.locks import use_kernel_batons

    use_kernel_batons()  # a reference that builds an extension: a killed build's lock never holds the next
    source = Path(path).read_text()
    module = types.ModuleType("evk_reference")
    module.__file__ = path
    exec(compile(source, path, "exec"), module.__dict__)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise LookupError(f"the task defines no {name}")
    return module


#: At most this many trials' outputs lie written and not yet compared (the parent removes a trial's
#: output files once compared: `verifier.run.trials.drop_outputs`) when a trial's outputs are bigger than
#: `WINDOW_MIN_BYTES`: a problem with gigabyte outputs then holds three trials of them in the trusted
#: folder (memory-backed), not all of its trials and probes at once (119 GB of host memory for a
#: 6.4 GB ReLU on an H200 host before this). The wait is bounded, so a parent that stopped comparing
#: (a failed gate) costs time, never a hang.
TRIAL_WINDOW = 3
WINDOW_MIN_BYTES = 256 << 20
WINDOW_WAIT_S = 60.0


def wait_for_room(written: list[Path], trial_bytes: int, window: int = TRIAL_WINDOW,
                  wait_s: float = WINDOW_WAIT_S) -> None:
    """Wait until fewer than `window` of the trial folders in `written` still hold output files."""
    if trial_bytes < WINDOW_MIN_BYTES:
        return
    end = time.monotonic() + wait_s
    while sum(1 for d in written if any(d.glob("out*.npy"))) >= window and time.monotonic() < end:
        time.sleep(0.01)


def draw_inputs(torch, task, seed: int, dist: str, device: str) -> list:
    """`get_inputs()` under `seed`; other distributions redraw its floating tensors (same shapes and
    dtypes) so closed-form shortcuts that hold only for the task's own distribution fail."""
    from verifier.correctness.input_recipe import dist_scale

    torch.manual_seed(seed)
    args = list(task.get_inputs())
    scale = dist_scale(dist)
    if scale is not None:  # the large-magnitude probe: the task's own inputs, floating tensors scaled
        args = [a * scale if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    elif dist != "task":
        gen = torch.Generator().manual_seed(seed ^ 0x5EED)
        out = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                shape = a.shape
                if dist == "normal":
                    b = torch.randn(shape, generator=gen)
                elif dist == "uniform":
                    b = torch.rand(shape, generator=gen) * 2 - 1
                else:
                    b = (torch.randn(shape, generator=gen) / torch.rand(shape, generator=gen).clamp_min(0.05)).clamp(-40, 40)
                a = b.to(a.dtype)
            out.append(a)
        args = out
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


class Worker:
    recv_at: float  # set by `main` as each command arrives (read with getattr: absent before)

    def __init__(self, channel):
        import numpy as np
        import torch

        self.torch, self.np, self.channel = torch, np, channel
        self.task = None
        self.task_path = ""
        self.model: Any = None
        self.device = "cpu"
        self.recipe: list[dict] | None = None
        self.captured: list[dict] | None = None
        self.input_names: list[str] | None = None
        self.device_compare = False  # outputs compared here, on the device (`examine`), not through files
        self.staging: Any = None  # the candidate's shared buffer (`shared_device_memory.ImportedBuffer`)
        self.trial_cmds: list[dict] = []
        self.trial_records: list[dict] = []

    def draw(self, seed: int, dist: str, into: list | None = None) -> list:
        """One call's inputs: from the recipe on the device when the task has one (into `into`, the last
        call's inputs, where shapes match: `input_recipe.draw`), else `get_inputs()`."""
        from verifier.correctness import input_recipe
        if self.recipe is not None:
            return input_recipe.draw(self.torch, self.recipe, int(seed), dist, self.device, into=into)
        if into is not None:
            into.clear()  # not drawn into: freed before `get_inputs()` allocates this call's
        return draw_inputs(self.torch, self.task, int(seed), dist, self.device)

    def _save_inputs(self, directory: Path, inputs: list, prefix: str, files: bool = False) -> None:
        """The file path's hand-over (a task without a recipe, or a round whose sets go by file:
        `verifier.api.sets_by_file`); nothing to write otherwise."""
        from verifier.clock.paired_calls import save_args

        if self.recipe is None or files:
            save_args(self.torch, self.np, directory, inputs, prefix=prefix)

    def prepare(self, cmd: dict) -> dict:
        from verifier.clock.paired_calls import npy_digest, plain_outputs, save_args, save_tensor, sync
        from verifier.workers.harness import IGNORED_OPS, profiler, top_ops

        torch, np = self.torch, self.np
        self.device = cmd.get("device", "cpu")
        from verifier.clock.paired_calls import apply_gpu_round_fields, default_heap
        default_heap()  # the last verification's timed rounds left the heap at `steady_heap`: given back
        if self.device == "cpu":  # where this verification's host memory starts (the plan counts from here)
            from verifier.clock.cpu_accounting import reset_rss_peak, rss_bytes

            if cmd.get("speed_of_light", True):
                warm_instruments(torch)
            self.peaks = {"base": rss_bytes()}
            reset_rss_peak()
        apply_gpu_round_fields(cmd)  # as the harness of this verification flushes, loops and pads
        torch.set_num_threads(max(1, int(cmd.get("threads") or torch.get_num_threads())))
        if cmd["task_path"] != self.task_path or self.task is None:
            self.task = _load_task(cmd["task_path"])
            self.task_path = cmd["task_path"]
            from verifier.correctness import input_recipe
            self.captured = input_recipe.capture(torch, self.task.get_inputs)
            self.input_names = _forward_names(self.task)
        # the parent may ask for the file path (`VerifyConfig.seeded_inputs = False`)
        self.recipe = self.captured if cmd.get("recipe", True) else None
        self.release()
        # every call's outputs compared here, on the device, from the candidate's shared buffer: a task
        # with seeded inputs on a GPU whose driver shares memory by descriptor (else files, as on the CPU)
        self.device_compare = bool(cmd.get("device_compare")) and self.device == "cuda" and self.recipe is not None
        if self.device_compare:
            from verifier.correctness import shared_device_memory
            self.device_compare = shared_device_memory.supported(torch)
        self.trial_cmds = list(cmd["trials"])
        torch.manual_seed(int(cmd["init_seed"]))
        init = list(self.task.get_init_inputs())
        torch.manual_seed(int(cmd["init_seed"]))
        model = self.task.Model(*init)
        init_dir = Path(cmd["init_dir"])
        save_args(torch, np, init_dir, init, prefix="init")
        weights: dict[str, dict] = {}
        if hasattr(model, "state_dict"):
            wdir = Path(cmd["weights_dir"])
            for k, v in model.state_dict().items():
                weights[k] = save_tensor(torch, np, wdir / f"w{len(weights)}.npy", v)
            (wdir / "weights.json").write_text(json.dumps(weights))
        if hasattr(model, "to"):
            model = model.to(self.device)
        if hasattr(model, "eval"):
            model.eval()
        self.model = model
        from verifier.correctness import input_recipe
        # init and weights are written: the parent can construct the candidate (with the recipe) now, and
        # check each trial as soon as its `trial_ready` arrives, while the later ones are still drawn
        self.channel.mark("init_ready", recipe=self.recipe, device_name=self.device_name(), device_id=self.device_id(),
                          input_distribution=input_recipe.describe(self.recipe, self.input_names),
                          device_compare=self.device_compare)
        trials = self.trial_records = []
        task_outs = None
        reuse: list | None = None  # the last trial's inputs, drawn into by the next (`input_recipe.draw`)

        written: list[Path] = []
        trial_bytes = 0
        with torch.no_grad():
            for trial in cmd["trials"]:
                d = Path(trial["dir"])
                inputs = outs = None  # the previous trial's, freed (its inputs drawn into) before this one's are drawn
                wait_for_room(written, trial_bytes)
                if trial.get("probe"):  # a numerics probe (verifier/correctness/probes.py): may be skipped, with a reason
                    ran = self._probe(trial, trials, reuse)
                    reuse = None
                    if "skip" in ran:
                        trials.append(ran)
                        self.channel.mark("trial_ready", index=len(trials) - 1, trial=trials[-1])
                        continue
                    inputs, outs, extra = ran["inputs"], ran["outs"], ran["extra"]
                    self._save_inputs(d, inputs, "in")
                else:
                    inputs, reuse = self.draw(int(trial["seed"]), trial.get("dist", "task"), reuse), None
                    self._save_inputs(d, inputs, "in")
                    outs = plain_outputs(torch, model(*inputs))
                    # its size kept, not the tensors: they held a trial's outputs beside the next trial's
                    task_outs = sum(o.numel() * o.element_size() for o in outs)
                    extra = {}
                sync(torch, self.device)
                written.append(d)
                trial_bytes = sum(o.numel() * o.element_size() for o in outs if isinstance(o, torch.Tensor))
                # in a comprehension: a loop's variable kept the last output alive beside the next trial's
                # (on the card too, after `empty_cache`: a 6.4 GB ReLU's output through the candidate's checks)
                metas = [self._out_meta(j, o, d, inputs) for j, o in enumerate(outs)]
                after = (None if self.device_compare else
                         [npy_digest(torch, np, x) if isinstance(x, torch.Tensor) else None for x in inputs])
                if self.device_compare and trial_bytes >= WINDOW_MIN_BYTES:
                    # recomputed when compared (`examine`): freed now, and the card's cache with them, so the
                    # candidate's gigabyte calls have room beside this worker
                    inputs = outs = None
                    torch.cuda.empty_cache()
                else:
                    reuse = inputs
                trials.append({"seed": trial["seed"], "dist": trial.get("dist", "task"), "outputs": metas,
                               "after_digests": after, **extra})
                self.channel.mark("trial_ready", index=len(trials) - 1, trial=trials[-1])
            if self.device in ("cpu", "cuda"):  # the trials' own peak, apart from the profile and speed of light's
                self.phase_peaks("trials")
            pdir = Path(cmd["profile_dir"])
            inputs = outs = None
            inputs = self.draw(int(cmd["profile_seed"]), "task", reuse)
            reuse = None
            self._save_inputs(pdir, inputs, "in")
            with profiler(torch, self.device) as prof:
                model(*inputs)
                sync(torch, self.device)
            profile = top_ops(prof)
        if self.device_compare:
            torch.cuda.empty_cache()
        in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
        out_bytes = task_outs if task_outs is not None else trial_bytes
        result = {"trials": trials, "profile": profile, "recipe": self.recipe,
                  "input_distribution": input_recipe.describe(self.recipe, self.input_names),
                  "ops_run": sorted({e.key for e in prof.key_averages()} - IGNORED_OPS),
                  "input_bytes": in_bytes, "output_bytes": out_bytes, "threads": torch.get_num_threads()}
        result["device_name"] = self.device_name()
        result["device_id"] = self.device_id()
        if self.device == "cuda":  # the room a timed round's sets and kept outputs may take on the card
            result["device_free_bytes"] = int(torch.cuda.mem_get_info()[0])
        if cmd.get("compare_compile"):
            result["compiled_times_ms"] = self._compiled_times(inputs)
        if cmd.get("speed_of_light", True):
            result.update(self._speed_of_light(model, inputs, cmd, shapes_only=in_bytes + out_bytes > FLOP_COUNT_MAX_BYTES))
        return result

    def _out_meta(self, j: int, o, d: Path, inputs: list) -> dict:
        """One trial output's record: written to `d` for the parent's comparison, or (compared on the device
        later, `examine` recomputes it) only its shape and dtype; whether it is one of the inputs."""
        from verifier.clock.paired_calls import save_tensor

        torch = self.torch
        meta = save_meta(torch, o) if self.device_compare else save_tensor(torch, self.np, d / f"out{j}.npy", o)
        meta["aliases_input"] = any(
            isinstance(x, torch.Tensor) and o.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
            for x in inputs)
        return meta

    def _speed_of_light(self, model, inputs: list, cmd: dict, shapes_only: bool = False) -> dict:
        """The task's FLOPs per call (torch's FLOP counter: matmuls, convolutions, attention; 0 for a task of
        elementwise ops and reductions) and the machine's bandwidth peak (`verifier.clock.bandwidth`, cached
        per CPU model and thread count, or per GPU). Neither is ever a reason to fail a verification."""
        from verifier.clock import bandwidth
        from verifier.clock.paired_calls import sync

        torch = self.torch
        out: dict = {}
        try:
            out["flops"] = count_flops(torch, model, inputs, shapes_only)
            if shapes_only:
                out["flops_method"] = "shapes only (fake tensors): the call moves more than FLOP_COUNT_MAX_BYTES"
            sync(torch, self.device)
            if self.device == "cuda":
                torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - an op the counter cannot trace: FLOPs unknown
            out["flops_error"] = f"{type(exc).__name__}: {exc}"[:200]
        try:
            out["bandwidth_peak"] = bandwidth.peak_bandwidth(
                torch, self.device, int(cmd.get("threads") or torch.get_num_threads()), self.device_name(),
                measure=bool(cmd.get("measure_peak", True)))
        except Exception as exc:  # noqa: BLE001 - no peak: the verdict says only GB/s
            out["bandwidth_peak"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        if out.get("flops"):  # a task with FLOPs (a matmul, a convolution): the compute roof too
            dtype = bandwidth.compute_dtype(torch, inputs or [])
            try:
                out["flops_peak"] = bandwidth.peak_flops(
                    torch, self.device, int(cmd.get("threads") or torch.get_num_threads()), self.device_name(),
                    measure=bool(cmd.get("measure_peak", True)), dtype=dtype)
            except Exception as exc:  # noqa: BLE001 - no FLOP peak: the verdict says only the bandwidth side
                out["flops_peak"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
            if dtype == "float32" and self.device == "cuda":  # pragma: no cover - GPU
                # the tensor cores' TF32 roof beside it: a kernel that rounds to TF32 is held to that one
                try:
                    out["flops_peak_tf32"] = bandwidth.peak_flops(
                        torch, self.device, int(cmd.get("threads") or torch.get_num_threads()), self.device_name(),
                        measure=bool(cmd.get("measure_peak", True)), dtype="tf32")
                except Exception as exc:  # noqa: BLE001 - no TF32 roof: the float32 one alone
                    out["flops_peak_tf32"] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        return out

    def release(self) -> None:
        """Unmap the candidate's shared buffer (its memory is freed once no process holds it)."""
        if self.staging is not None:
            self.staging.close()
            self.staging = None
            self.torch.cuda.empty_cache()

    def examine(self, cmd: dict) -> dict:
        """One call of the candidate checked on the device: its outputs (and its inputs as forward left
        them) read from its shared buffer, compared with this worker's own for the same trial, recomputed
        now (`compare`); and/or a keyed digest of its outputs (`digest_key`, the decoy probe's). What the
        candidate claims (regions, shapes, dtypes, the buffer itself) is checked here; a bad claim is a
        failure with one line (`fail`), never an exception of this worker."""
        torch = self.torch
        from verifier.clock.paired_calls import dtype_name, plain_outputs, sync
        from verifier.correctness import device_compare
        from verifier.correctness.bit_digest import equal_bits
        from verifier.correctness.shared_device_memory import ImportedBuffer

        label = str(cmd.get("label") or "trial")[:200]
        stage = cmd.get("stage")
        if isinstance(stage, dict):  # a new buffer: its descriptor was sent just before this command
            self.release()
            got = self.channel.receive_fd(10.0)
            if got is None or got[0] != stage.get("tag"):
                if got is not None:
                    os.close(got[1])
                return {"fail": f"{label}: the candidate's shared buffer did not arrive"}
            try:
                self.staging = ImportedBuffer(torch, got[1], int(stage["nbytes"]))
            except Exception as exc:  # noqa: BLE001 - the candidate's descriptor: its failure, one line
                return {"fail": f"{label}: the candidate's shared buffer could not be mapped ({str(exc)[:200]})"}
            finally:
                os.close(got[1])
        if self.staging is None:
            return {"fail": f"{label}: the candidate shared no buffer for its results"}
        claimed = cmd.get("outputs")
        if not isinstance(claimed, list):
            return {"fail": f"{label}: the candidate's results were malformed (no output list)"}
        result: dict = {}
        if cmd.get("compare"):
            index = int(cmd["index"])
            trial = self.trial_cmds[index]
            with torch.no_grad():
                if trial.get("probe"):
                    ran = self._probe(trial, self.trial_records[:index])
                    if "skip" in ran:
                        raise RuntimeError(f"the reference skipped trial {index} now: {ran['skip']}")
                    inputs, outs = ran["inputs"], ran["outs"]
                else:
                    inputs = self.draw(int(trial["seed"]), trial.get("dist", "task"))
                    outs = plain_outputs(torch, self.model(*inputs))
                sync(torch, self.device)
            if len(claimed) != len(outs):
                return {"fail": f"{label}: forward returned {len(claimed)} outputs, expected {len(outs)}"}
            worst_abs = worst_rel = 0.0
            degenerate, magnitude = bool(cmd.get("degenerate")), bool(cmd.get("magnitude"))
            for j, (region, want) in enumerate(zip(claimed, outs, strict=True)):
                got = self._region(region, want, f"output {j}")
                if isinstance(got, str):
                    return {"fail": f"{label}: {got}"}
                spread = device_compare.output_spread(torch, want) if degenerate else None
                cmp = device_compare.compare(torch, got, want, dtype_name(torch, want.dtype), dtype_name(torch, want.dtype),
                                             cmd.get("atol"), cmd.get("rtol"), f"output {j}", spread=spread,
                                             magnitude=magnitude)
                worst_abs, worst_rel = max(worst_abs, cmp.max_abs), max(worst_rel, cmp.max_rel)
                if not cmp.ok:
                    return {"fail": f"{label}: {cmp.reason}", "mismatch": cmp.mismatch, "max_abs": cmp.max_abs,
                            "max_rel": cmp.max_rel}
            after = cmd.get("after")
            if cmd.get("outputs_only") is True:  # the fresh decoy probe: its outputs alone are judged
                after, inputs = [], []
            elif not isinstance(after, list) or len(after) != len(inputs):
                return {"fail": f"{label}: forward was given {len(inputs)} inputs, the report has "
                                f"{len(after) if isinstance(after, list) else 0}"}
            for j, (region, x) in enumerate(zip(after, inputs, strict=True)):
                if not isinstance(x, torch.Tensor):
                    continue
                got = self._region(region, x, f"input {j}")
                if isinstance(got, str) or not equal_bits(torch, got, x):
                    return {"fail": f"{label}: input {j} was modified by forward; inputs must stay unchanged"}
            result.update(max_abs=worst_abs, max_rel=worst_rel)
        key = cmd.get("digest_key")
        if isinstance(key, int):
            digests = []
            for region in claimed:
                view = self._region(region, None, "output")
                digests.append(None if isinstance(view, str) else device_compare.digest(torch, view, key))
            result["digests"] = digests
        return result

    def _region(self, region, like, what: str):
        """The candidate's claimed region as a tensor (a view of the shared buffer), or why not (a str).
        With `like`, its shape and dtype must be the reference's (the message says which differs)."""
        from verifier.clock.paired_calls import dtype_name

        torch = self.torch
        if not isinstance(region, dict) or not isinstance(region.get("offset"), int) or not isinstance(region.get("shape"), list):
            return f"the candidate's results were malformed ({what} has no region)"
        shape, dtype = region["shape"], str(region.get("dtype"))
        if not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            return f"the candidate's results were malformed ({what} has a bad shape)"
        if like is not None:
            if list(shape) != list(like.shape):
                return f"{what} has shape {list(shape)}, expected {list(like.shape)}"
            if dtype != dtype_name(torch, like.dtype):
                return f"{what} has dtype {dtype}, expected {dtype_name(torch, like.dtype)}"
            torch_dtype = like.dtype
        else:
            if dtype not in _DTYPES:
                return f"{what} has an unknown dtype"
            torch_dtype = getattr(torch, dtype)
        try:
            return self.staging.view(torch, region["offset"], shape, torch_dtype)
        except (ValueError, RuntimeError) as exc:
            return f"the candidate's results were malformed ({what}: {str(exc)[:160]})"

    def _probe(self, trial: dict, done: list[dict], reuse: list | None = None) -> dict:
        """One numerics probe's reference run: {"inputs", "outs", "extra"} (what the trial record adds:
        the probe's kind and name, a held-out shape's recipe and label), or the trial record of a skipped
        probe ({"skip": why, ...}). Skipped: a magnitude probe where the reference raises or is not finite,
        a held-out shape the recipe cannot make, the reference cannot take, or answers inconsistently."""
        from verifier.clock.paired_calls import dtype_name, plain_outputs
        from verifier.correctness import probes

        torch = self.torch
        extra = {"probe": trial["probe"], "name": trial.get("name", "")}
        seed, dist = int(trial["seed"]), str(trial.get("dist", "task"))

        def skipped(why: str) -> dict:
            return {"seed": trial["seed"], "dist": dist, "outputs": [], **extra, "skip": why}

        recipe = None
        if trial["probe"] == probes.SHAPE:
            variants = probes.shape_variants(self.recipe, seed)
            k = int(trial.get("variant", 0))
            variant: dict[str, Any] = variants[k] if k < len(variants) else {"skip": "no such variant"}
            if "skip" in variant:
                return skipped(variant["skip"])
            recipe = variant["recipe"]
            extra.update(recipe=recipe, label=variant["label"])
        try:
            if recipe is not None:
                from verifier.correctness import input_recipe
                inputs = input_recipe.draw(torch, recipe, seed, dist, self.device, into=reuse)
            else:
                inputs = self.draw(seed, dist, reuse)
            outs = plain_outputs(torch, self.model(*inputs))
        except Exception as exc:  # noqa: BLE001 - the reference cannot take these inputs: no probe
            return skipped(f"the reference raised {type(exc).__name__}: {str(exc)[:160]}")
        if trial["probe"] == probes.MAGNITUDE:
            why = probes.nonfinite_reason(torch, outs)
            if why:
                return skipped(why)
        else:
            first = next((t for t in done if not t.get("probe")), None)
            if first is not None:
                why = probes.outputs_consistent(first["outputs"], [{"shape": list(o.shape), "dtype": dtype_name(torch, o.dtype)}
                                                                   for o in outs])
                if why:
                    return skipped(why)
        return {"inputs": inputs, "outs": outs, "extra": extra}

    def device_name(self) -> str:
        if self.device == "cuda":
            return self.torch.cuda.get_device_name()
        import platform

        return f"cpu ({platform.machine()}, {self.torch.get_num_threads()} threads)"

    def device_id(self) -> str:
        """Which card this worker uses, as it sees it (`verifier.result.device_label_id`); "cpu" on the CPU."""
        if self.device != "cuda":
            return "cpu"
        from verifier.result import device_label_id

        torch = self.torch
        index = int(torch.cuda.current_device())
        uuid = str(getattr(torch.cuda.get_device_properties(index), "uuid", "") or "")
        return device_label_id(os.environ.get("CUDA_VISIBLE_DEVICES"), index, uuid)

    def _compiled_times(self, inputs: list) -> list[float]:
        from verifier.clock.paired_calls import time_round

        compiled = self.torch.compile(self.model)
        times, _ = time_round(self.torch, compiled, [inputs] * 8, self.device, keep_outputs=False)
        return times[3:]

    def round(self, cmd: dict) -> dict:
        """`count` fresh input sets (seeds the parent drew), timed one call each; the outputs of every
        call listed in `save` (the parent lists them all) saved for the checks of the candidate's round
        on the same sets. The outputs stay in memory for the `stub_round` that follows. `timing_wall_ms`,
        `timing_cpu_ms` and `timing_wait_ms` (CPU time and run-queue wait over the timed calls) tell the
        parent whether this side was disturbed."""
        import time

        from verifier.clock.cpu_accounting import thread_wait_ns
        from verifier.clock.paired_calls import _perf_ns, draw_sets, save_tensor, time_round

        torch, np = self.torch, self.np
        d = Path(cmd["dir"])
        self.kept = self.round_outputs = None  # the last round's, checked: freed before this round's are made
        # with a recipe, drawn as the harness, the replay and the stub draw a round (`draw_sets`: all at once)
        sets = (draw_sets(torch, self.recipe, cmd["seeds"], self.device) if self.recipe is not None
                else [self.draw(int(seed), "task") for seed in cmd["seeds"]])
        for k, inputs in enumerate(sets):
            self._save_inputs(d, inputs, f"s{k}_in", bool(cmd.get("files")))
        tid = threading_native_id()
        wait0, cpu0, t0 = thread_wait_ns(tid, os.getpid()), time.process_time_ns(), _perf_ns()
        with torch.no_grad():
            times, kept = time_round(torch, self.model, sets, self.device, detach_inputs=False)
        wall_ms, cpu_ms = (_perf_ns() - t0) / 1e6, (time.process_time_ns() - cpu0) / 1e6
        wait_ms = (thread_wait_ns(tid, os.getpid()) - wait0) / 1e6
        del sets
        extra: dict = {}
        readable = _readable_outputs(torch, kept) if cmd.get("in_memory") and self.device == "cpu" else None
        if readable is not None:
            # the parent reads them from this process while it waits for the next command (the checks of
            # the candidate's round), as it reads the candidate's: no file per output written and mapped
            self.round_readable = readable
            extra = {"outputs_at": [[_at(torch, o) for o in outs] for outs in readable], "pid": os.getpid()}
        else:
            sampled = {int(k) for k in cmd.get("save", range(len(kept)))}
            for k, outs in enumerate(kept):
                if k in sampled:
                    for j, o in enumerate(outs):
                        save_tensor(torch, np, d / f"s{k}_out{j}.npy", o)
        self.kept = kept
        self.round_outputs = kept  # for `save_blocks` (the GPU's block checks), until the next round
        return {"times_ms": times, "outputs": [[save_meta(torch, o) for o in outs] for outs in kept],
                "timing_wall_ms": wall_ms, "timing_cpu_ms": cpu_ms, "timing_wait_ms": wait_ms,
                "threads": torch.get_num_threads(), **extra}

    def phase_peaks(self, phase: str) -> dict:
        """Live device memory at its peak since the last call, charged to `phase` (the largest seen for it),
        then the peak counter reset: where this worker's memory goes (issue 33's plan). Read only after an
        unclocked command (after `prepare`, `examine`, `save_blocks`): reading the allocator's statistics
        costs a fraction of a millisecond, which inside a clocked replay or stub would move the figures."""
        peaks = self.__dict__.setdefault("peaks", {})
        if self.device == "cpu":  # the host is the device: the process's resident peak (`VmHWM`), then reset
            from verifier.clock.cpu_accounting import reset_rss_peak, rss_bytes

            peaks[phase] = max(int(peaks.get(phase, 0)), rss_bytes(peak=True))
            reset_rss_peak()
        elif self.device == "cuda":
            took = int(self.torch.cuda.max_memory_allocated())
            peaks[phase] = max(int(peaks.get(phase, 0)), took)
            # the reset clears the reserved peak too: kept here for `peak` (the whole verification's)
            self.reserved_peak = max(int(getattr(self, "reserved_peak", 0)), int(self.torch.cuda.max_memory_reserved()))
            self.torch.cuda.reset_peak_memory_stats()
        return dict(peaks)

    def save_blocks(self, cmd: dict) -> dict:
        """The blocks of this round's outputs the parent chose after the candidate's round ended (the GPU's
        timed-call check), written as `s{k}_out{j}_b{b}.npy` into the trusted round directory."""
        from verifier.clock.paired_calls import save_blocks

        return {"outputs": save_blocks(self.torch, self.np, Path(cmd["dir"]), getattr(self, "round_outputs", None) or [],
                                       cmd.get("blocks") or {}, str(cmd.get("tag") or "b"))}

    def _round_sets(self, cmd: dict) -> list[list]:
        """The round's input sets as the candidate's harness gets them, inside the parent's clock: drawn
        from the command's seeds (`draw_sets`) for a task with a recipe, else read from the round's files
        (`load_sets`). The same code the harness runs, so the stub's overhead is like for like."""
        from verifier.clock.paired_calls import draw_sets, load_sets

        if self.recipe is not None and cmd.get("seeds") is not None:
            return draw_sets(self.torch, self.recipe, cmd["seeds"], self.device)
        return load_sets(self.torch, self.np, Path(cmd["dir"]), int(cmd["count"]), self.device)

    def stub_round(self, cmd: dict) -> dict:
        """The trusted overhead of a candidate's round, clocked by the parent exactly as it clocks the
        candidate's (from sending the command to receiving `timing_end`): the candidate side's loop
        (`draw_sets` or `load_sets`, then `time_round` with the same `detach_inputs`) over the same input
        sets, with a model whose calls return the reference's ready outputs. Everything in that window but the
        calls themselves."""
        from verifier.clock.paired_calls import last_loop_detail, ready_model, time_round

        torch = self.torch
        kept = getattr(self, "kept", None) or []
        t0, m0 = time.perf_counter(), time.monotonic()
        sets = self._round_sets(cmd)
        t_sets, m_sets = time.perf_counter(), time.monotonic()
        self.channel.mark("timing_start")
        with torch.no_grad():
            times, _ = time_round(torch, ready_model(kept), sets, self.device,
                                  detach_inputs=cmd.get("detach_inputs") is not False,
                                  by_reference=self.device == "cpu")
        self.kept = None
        return {"times_ms": times, "inner_ms": [(t_sets - t0) * 1e3, (time.perf_counter() - t_sets) * 1e3],
                "stamps": [getattr(self, "recv_at", m0), m0, m_sets, time.monotonic(), time.monotonic()],
                "loop_detail": last_loop_detail()}

    def replay(self, cmd: dict) -> dict:
        """The reference's own figure on the parent's clock: the candidate side's loop (`_round_sets`, then
        `time_round` with the same `detach_inputs`) over the same input sets with the real model, clocked
        from the command to `timing_end` exactly as the candidate's round and the stub are. Both sides'
        figures are then (clocked round - stub) / calls: the same code, the same clock, so an A/A pairs
        like with like and no per-call timer of either process decides the speedup."""
        from verifier.clock.paired_calls import last_loop_detail, time_round

        torch = self.torch
        t0, m0 = time.perf_counter(), time.monotonic()
        sets = self._round_sets(cmd)
        t_sets, m_sets = time.perf_counter(), time.monotonic()
        self.channel.mark("timing_start")
        with torch.no_grad():
            times, _ = time_round(torch, self.model, sets, self.device,
                                  detach_inputs=cmd.get("detach_inputs") is not False,
                                  by_reference=self.device == "cpu")
        return {"times_ms": times, "inner_ms": [(t_sets - t0) * 1e3, (time.perf_counter() - t_sets) * 1e3],
                "stamps": [getattr(self, "recv_at", m0), m0, m_sets, time.monotonic(), time.monotonic()],
                "loop_detail": last_loop_detail()}


def _forward_names(task) -> list[str] | None:
    """The reference forward's argument names, for `input_recipe.describe` (None when unreadable)."""
    import inspect

    try:
        return [p for p in inspect.signature(task.Model.forward).parameters if p != "self"]
    except (TypeError, ValueError):
        return None


READABLE_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_DTYPES = frozenset(READABLE_DTYPES) | {"complex64", "complex128"}  # what a staged region may claim to be


def _readable_outputs(torch, kept: list) -> list | None:
    """A round's outputs as the parent compares them (contiguous; float16/bfloat16 widened to float32, as
    `save_tensor` writes them), or None when one has a dtype the parent cannot read back (then files)."""
    from verifier.clock.paired_calls import dtype_name

    out = []
    for outs in kept:
        row = []
        for o in outs:
            t = o.detach()
            if t.device.type != "cpu" or dtype_name(torch, t.dtype) not in READABLE_DTYPES:
                return None
            if t.dtype in (torch.float16, torch.bfloat16):
                t = t.float()
            row.append(t.contiguous())
        out.append(row)
    return out


def _at(torch, t) -> dict:
    from verifier.clock.paired_calls import dtype_name

    return {"addr": int(t.data_ptr()), "nbytes": int(t.numel() * t.element_size()), "shape": list(t.shape),
            "dtype": dtype_name(torch, t.dtype)}


def count_flops(torch, model, inputs: list, shapes_only: bool = False) -> int:
    """The task's FLOPs per call by torch's FLOP counter (matmuls, convolutions, attention; 0 for
    elementwise ops and reductions). `shapes_only`: the call runs on fake tensors of the inputs' shapes
    and devices (`FakeTensorMode`), so a KernelBench head problem of gigabytes is counted without a second
    full-size call's memory or time (the counter needs shapes, not values); the model's real weights are
    read as fakes too. Raises what the counter or the model raises (a data-dependent op under fakes)."""
    from torch.utils.flop_counter import FlopCounterMode

    if not shapes_only:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*inputs)
        return int(counter.get_total_flops())
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad(), mode, FlopCounterMode(display=False) as counter:
        model(*fakes)
    return int(counter.get_total_flops())


_WARMED: list[bool] = []  # the pooled worker's instruments loaded (`warm_instruments`)


def warm_instruments(torch) -> None:
    """Load the FLOP counter and the CPU profiler once per process, on a 3x3 call, before the memory plan
    reads its base: their code and tables (about 150 MB resident on the first use) are the library's, not
    the problem's, and on a 128 MB problem read as 1.2 problem sizes of `prepare` (CI: 3.04x against a 3x
    plan). The pooled worker's later verifications find them loaded."""
    if _WARMED:
        return
    _WARMED.append(True)
    from torch.utils.flop_counter import FlopCounterMode

    from verifier.workers.harness import profiler

    a = torch.ones(3, 3)
    with torch.no_grad(), FlopCounterMode(display=False):
        a @ a
    with profiler(torch, "cpu") as prof:
        a + 1
    prof.key_averages()


def threading_native_id() -> int:
    import threading

    return threading.get_native_id()


def save_meta(torch, o) -> dict:
    return {"shape": list(o.shape), "dtype": str(o.dtype).replace("torch.", "")}


def main() -> int:
    from verifier.sandbox.channel import Channel

    channel = Channel.from_env()
    worker = Worker(channel)
    while True:
        cmd = channel.recv()
        worker.recv_at = time.monotonic()  # when the command arrived (diagnostics of a clocked window)
        kind = cmd.get("cmd")
        if kind == "finish":
            return 0
        try:
            if kind == "prepare" and cmd.get("device") == "cuda":
                worker.torch.cuda.reset_peak_memory_stats()  # this verification's peak (the worker is pooled)
            if kind == "peak":
                took = max(int(worker.torch.cuda.max_memory_reserved()), int(getattr(worker, "reserved_peak", 0))) \
                    if worker.device == "cuda" else 0
                phases = worker.phase_peaks("rest")
                if worker.device == "cpu":
                    took = max((int(v) for k, v in phases.items() if k != "base"), default=0)
                channel.mark("peak", device_peak_bytes=took, phases=phases)
            elif kind == "prepare":
                worker.peaks, worker.reserved_peak = {}, 0
                channel.mark("prepared", **worker.prepare(cmd))
                if worker.device == "cuda":  # the profile call's sets freed with prepare's frame: back to the driver
                    worker.torch.cuda.empty_cache()
                    worker.phase_peaks("prepare")
                elif worker.device == "cpu":
                    worker.phase_peaks("prepare")
            elif kind == "round":
                channel.mark("round_done", **worker.round(cmd))
            elif kind == "stub_round":
                channel.mark("timing_end", **worker.stub_round(cmd))
            elif kind == "replay":
                channel.mark("timing_end", **worker.replay(cmd))
            elif kind == "save_blocks":
                channel.mark("blocks_saved", **worker.save_blocks(cmd))
                worker.phase_peaks("rounds")  # after the mark: the parent's next clocked window is not open yet
            elif kind == "examine":
                channel.mark("examined", **worker.examine(cmd))
                if worker.device == "cuda":  # the recomputed call's tensors back to the driver (room for the candidate)
                    worker.torch.cuda.empty_cache()
                    worker.phase_peaks("examine")
            elif kind == "wake":  # just before a clocked window (`paired_calls.wake_enabled`)
                from verifier.clock.paired_calls import wake

                wake(worker.torch, worker.device)
                channel.mark("awake")
            elif kind == "release":
                worker.release()
            else:
                channel.mark("error", error_type="ValueError", error=f"unknown command {kind!r}")
        except BaseException as exc:  # reported to the parent, which turns it into one line
            channel.mark("error", error_type=type(exc).__name__, error=str(exc)[:2000],
                         traceback=traceback.format_exc()[-3000:])
            if isinstance(exc, (MemoryError, KeyboardInterrupt, SystemExit)):
                return 3


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
