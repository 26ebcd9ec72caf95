"""The trusted reference worker's part of one verification: the `prepare` command (init arguments,
weights, trials, profile set, under the trusted directory) and the marks it answers with, read as
they arrive, with the input recipe it claims checked for shape. A mixin of `verifier.run.verification._Run`.
"""

from __future__ import annotations

from verifier.clock.paired_calls import flush_bytes_of, gpu_loop_of
from verifier.errors import VerifierError
from verifier.workers.pools import _REFERENCE, _threads


class ReferenceSide:
    """The reference side of a run (`_Run`): what the trusted worker prepares and reports."""

    def prepare_reference(self) -> None:
        self.send_prepare()
        self.await_reference()
        self.finish_reference()

    def send_prepare(self) -> None:
        """Ask the trusted reference worker for this verification's init arguments, weights, trials and
        profile set, all written under the trusted directory (handed to the candidate only later)."""
        self.ref_held = _REFERENCE.get(self.reference_source, self.be, self.config)
        ref, task = self.ref_held
        assert self.job_dir is not None and self.trusted_dir is not None
        for sub in ("init", "weights"):
            (self.trusted_dir / sub).mkdir()
        dists = [d for d in self.config.input_distributions if d] or ["task"]
        trials = []
        from verifier.correctness.decoy import ordinary_slots, plan

        # one ordinary trial more than the clean ones: the fresh probe takes its place (`decoy.plan`)
        slots = ordinary_slots(self.config.trials)
        for i in range(slots):
            d = self.trusted_dir / f"trial{i}"
            d.mkdir()
            trials.append({"seed": self.seed(), "dir": str(d)})
        from verifier.correctness.probes import probe_trials

        for spec in probe_trials(self.config, self.rng):  # the numerics probes: more trials, after the ordinary ones
            d = self.trusted_dir / f"trial{len(trials)}"
            d.mkdir()
            trials.append({**spec, "seed": self.seed(), "dir": str(d)})
        self.planned_trials = len(trials)  # what "trial 3/8" counts up to (`_Run.reference_trial`)
        (self.trusted_dir / "profile").mkdir()
        self.init_seed = self.seed()
        self.profile_seed = self.seed()
        # Where the two checked forwards go (drawn last, as when the trial loop drew them): the clean trials
        # keep the distributions in turn, as they did before there was a fresh probe, and the fresh probe
        # gets one drawn from them. (With one distribution, the default, every ordinary trial looks alike;
        # with several, a candidate that reads the distributions can narrow down which trial is the probe.)
        self.decoy_plan = plan(self.rng, max(1, self.config.trials))
        clean = 0
        for k in range(slots):
            if k == self.decoy_plan["fresh"]:
                trials[k]["dist"] = self.rng.choice(dists)
            else:
                trials[k]["dist"] = dists[clean % len(dists)]
                clean += 1
        cmd = {"cmd": "prepare", "task_path": str(task), "init_seed": self.init_seed, "trials": trials,
               "init_dir": str(self.trusted_dir / "init"), "weights_dir": str(self.trusted_dir / "weights"),
               "profile_dir": str(self.trusted_dir / "profile"), "profile_seed": self.profile_seed,
               "device": self.be.device, "threads": _threads(self.config),
               "compare_compile": self.config.compare_compile,
               # seeded inputs (issue 22): off only to measure or test the file path
               "recipe": (self.config.extra or {}).get("seeded_inputs", True) is not False,
               # outputs compared on the device (the GPU data path): off only to measure or test files
               "device_compare": (self.config.extra or {}).get("device_compare", True) is not False,
               "l2_flush_bytes": flush_bytes_of(self.config), "gpu_loop": gpu_loop_of(self.config),
               # the task's FLOPs and the machine's bandwidth peak (issue 35): measured once per machine, cached
               "speed_of_light": (self.config.extra or {}).get("speed_of_light", True) is not False,
               "measure_peak": (self.config.extra or {}).get("bandwidth_peak_gbps") is None}
        if not ref.send(cmd):
            raise VerifierError("the reference worker could not be started; check the task with `evokernel tasks`")
        self.prepare_pending = True

    def await_reference(self) -> None:
        """The reference's init arguments, weights and input recipe (`init_ready`); its trials follow one by
        one (`reference_trial`), the rest with `prepared` (`finish_reference`). Raises VerifierError when
        the task itself fails."""
        if not self.prepare_pending or self.ref_held is None or self.reference:
            return
        mark = self._reference_mark({"init_ready"})
        if mark["phase"] == "init_ready":
            self.reference = {"recipe": mark.get("recipe"), "input_distribution": mark.get("input_distribution", ""),
                              "device_name": mark.get("device_name", ""), "device_id": mark.get("device_id", ""),
                              "trials": []}
            self.device_compare = mark.get("device_compare") is True
        self._checked_reference()

    def reference_trial(self, i: int) -> dict | None:
        """Trial `i` of the reference, waiting for it if the worker is still drawing it (None: no such trial)."""
        while self.prepare_pending and len(self.reference.get("trials", [])) <= i:
            mark = self._reference_mark({"trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference["trials"].append(mark["trial"])
                self._checked_reference()
        trials = self.reference.get("trials", [])
        return trials[i] if i < len(trials) else None

    def finish_reference(self) -> None:
        """Everything the reference reports (`prepared`): its profile, sizes, timings."""
        while self.prepare_pending:
            mark = self._reference_mark({"init_ready", "trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference.setdefault("trials", []).append(mark["trial"])
        self._checked_reference()

    def _reference_mark(self, phases: set[str]) -> dict:
        """The reference worker's next mark in `phases`, or its `prepared` (which ends the preparation);
        VerifierError when it failed or did not finish."""
        assert self.ref_held is not None
        mark = self.ref_held[0].expect({*phases, "prepared", "error"}, self.config.run_timeout_s * 3)
        if mark is None or mark.get("phase") == "error":
            self.prepare_pending = False
            self._drop_reference()
            if mark is None:
                raise VerifierError("the reference task did not finish (too slow or out of memory?); check it with "
                                    "`evokernel tasks`, or raise --run-timeout (verify) / --memory-gb")
            raise VerifierError(f"the reference task failed: {mark.get('error_type')}: {str(mark.get('error', ''))[:200]}")
        if mark.get("phase") == "prepared":
            self.prepare_pending = False
            self.reference = mark
        return mark

    def _checked_reference(self) -> None:
        self.reference["profile_seed"] = self.profile_seed
        if not _valid_recipe(self.reference.get("recipe")):
            self.reference["recipe"] = None
        for i, t in enumerate(self.reference.get("trials", [])):
            t["dir"] = f"trial{i}"

    def _drop_reference(self) -> None:
        if self.ref_held is not None:
            self.ref_held[0].kill()
            self.ref_held = None


def _valid_recipe(recipe) -> bool:
    """A recipe as `input_recipe.capture` makes it (the reference worker's claim, checked for shape
    before it is sent to the harness)."""
    if not isinstance(recipe, list):
        return False
    for entry in recipe:
        if not isinstance(entry, dict) or not isinstance(entry.get("kind"), str):
            return False
        if entry["kind"] != "value" and not (isinstance(entry.get("shape"), list) and isinstance(entry.get("dtype"), str)):
            return False
    return True
