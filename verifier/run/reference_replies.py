"""The trusted reference worker's part of one verification: the `prepare` command (init arguments,
weights, trials, profile set, under the trusted directory) and the marks it answers with, read as
they arrive, with the input recipe it claims checked for shape.

`ReferenceSide` is a collaborator of one verification (`verifier.run.verification._Run` holds it as
`ref_side`): given the task's source, the backend and the settings, it takes a worker from the pool, and it
holds what the worker reported (`reference`) and the worker itself (`held`) until the run gives it back.
The seeds and the trusted directory it prepares in are passed to `send_prepare`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.clock.paired_calls import gpu_round_fields
from verifier.config import VerifyConfig
from verifier.errors import VerifierError
from verifier.workers.pools import _REFERENCE, _threads

if TYPE_CHECKING:
    from verifier.backends import Backend
    from verifier.sandbox.supervisor import LiveJob


class ReferenceSide:
    """The reference side of one verification of `reference_source` on `be` under `config`: what the trusted
    worker prepares and reports."""

    def __init__(self, reference_source: str, be: Backend, config: VerifyConfig) -> None:
        self.reference_source, self.be, self.config = reference_source, be, config
        #: what the worker reported: init_ready's recipe and device, the trials as they come, then `prepared`
        self.reference: dict[str, Any] = {}
        #: the pool's worker (its job, the task file it loaded), from `send_prepare` until the run gives it back
        self.held: tuple[LiveJob, Path] | None = None
        self.pending = False  # a prepare command is out at the worker
        self.device_compare = False  # outputs checked on the device by the worker (`Trials.examine`)
        self.decoy_plan: dict | None = None  # where the checked forwards go (`send_prepare` draws it)
        self.planned_trials = 0  # what "trial 3/8" counts up to
        self.init_seed: int | None = None
        self.profile_seed: int | None = None

    def shared(self) -> ReferenceSide:
        """This side's preparation for a second run of the same inputs (`compare`): its reports, init seed
        and decoy plan, but no worker (the first run's serves the paired window and is given back by it)."""
        other = ReferenceSide(self.reference_source, self.be, self.config)
        other.reference, other.init_seed, other.decoy_plan = self.reference, self.init_seed, self.decoy_plan
        other.profile_seed = self.profile_seed
        return other

    def prepare(self, trusted_dir: Path, rng: random.Random, seed: Callable[[], int]) -> None:
        """The whole preparation at once: sent, then waited for to the end."""
        self.send_prepare(trusted_dir, rng, seed)
        self.await_reference()
        self.finish_reference()

    def send_prepare(self, trusted_dir: Path, rng: random.Random, seed: Callable[[], int]) -> None:
        """Ask the trusted reference worker for this verification's init arguments, weights, trials and
        profile set, all written under `trusted_dir` (handed to the candidate only later); the trials'
        seeds and the decoy plan are drawn from the run's secret `rng` (`seed()`: its next seed)."""
        self.held = _REFERENCE.get(self.reference_source, self.be, self.config)
        ref, task = self.held
        for sub in ("init", "weights"):
            (trusted_dir / sub).mkdir()
        dists = [d for d in self.config.input_distributions if d] or ["task"]
        trials = []
        from verifier.correctness.decoy import ordinary_slots, plan

        # one ordinary trial more than the clean ones: the fresh probe takes its place (`decoy.plan`)
        slots = ordinary_slots(self.config.trials)
        for i in range(slots):
            d = trusted_dir / f"trial{i}"
            d.mkdir()
            trials.append({"seed": seed(), "dir": str(d)})
        from verifier.correctness.probes import probe_trials

        for spec in probe_trials(self.config, rng):  # the numerics probes: more trials, after the ordinary ones
            d = trusted_dir / f"trial{len(trials)}"
            d.mkdir()
            trials.append({**spec, "seed": seed(), "dir": str(d)})
        self.planned_trials = len(trials)  # what "trial 3/8" counts up to (`_Run.reference_trial`)
        (trusted_dir / "profile").mkdir()
        self.init_seed = seed()
        self.profile_seed = seed()
        # Where the two checked forwards go (drawn last, as when the trial loop drew them): the clean trials
        # keep the distributions in turn, as they did before there was a fresh probe, and the fresh probe
        # gets one drawn from them. (With one distribution, the default, every ordinary trial looks alike;
        # with several, a candidate that reads the distributions can narrow down which trial is the probe.)
        self.decoy_plan = plan(rng, max(1, self.config.trials))
        clean = 0
        for k in range(slots):
            if k == self.decoy_plan["fresh"]:
                trials[k]["dist"] = rng.choice(dists)
            else:
                trials[k]["dist"] = dists[clean % len(dists)]
                clean += 1
        cmd = {"cmd": "prepare", "task_path": str(task), "init_seed": self.init_seed, "trials": trials,
               "init_dir": str(trusted_dir / "init"), "weights_dir": str(trusted_dir / "weights"),
               "profile_dir": str(trusted_dir / "profile"), "profile_seed": self.profile_seed,
               "device": self.be.device, "threads": _threads(self.config),
               "compare_compile": self.config.compare_compile,
               # seeded inputs (issue 22): off only to measure or test the file path
               "recipe": self.config.seeded_inputs is not False,
               # outputs compared on the device (the GPU data path): off only to measure or test files
               "device_compare": self.config.device_compare is not False,
               **gpu_round_fields(self.config),
               # the task's FLOPs and the machine's bandwidth peak (issue 35): measured once per machine, cached
               "speed_of_light": self.config.speed_of_light is not False,
               "measure_peak": self.config.bandwidth_peak_gbps is None}
        if not ref.send(cmd):
            raise VerifierError("the reference worker could not be started; check the task with `evokernel tasks`")
        self.pending = True

    def await_reference(self) -> None:
        """The reference's init arguments, weights and input recipe (`init_ready`); its trials follow one by
        one (`reference_trial`), the rest with `prepared` (`finish_reference`). Raises VerifierError when
        the task itself fails."""
        if not self.pending or self.held is None or self.reference:
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
        while self.pending and len(self.reference.get("trials", [])) <= i:
            mark = self._reference_mark({"trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference["trials"].append(mark["trial"])
                self._checked_reference()
        trials = self.reference.get("trials", [])
        return trials[i] if i < len(trials) else None

    def finish_reference(self) -> None:
        """Everything the reference reports (`prepared`): its profile, sizes, timings."""
        while self.pending:
            mark = self._reference_mark({"init_ready", "trial_ready"})
            if mark["phase"] == "trial_ready" and isinstance(mark.get("trial"), dict):
                self.reference.setdefault("trials", []).append(mark["trial"])
        self._checked_reference()

    def _reference_mark(self, phases: set[str]) -> dict:
        """The reference worker's next mark in `phases`, or its `prepared` (which ends the preparation);
        VerifierError when it failed or did not finish."""
        assert self.held is not None
        mark = self.held[0].expect({*phases, "prepared", "error"}, self.config.run_timeout_s * 3)
        if mark is None or mark.get("phase") == "error":
            self.pending = False
            self.drop()
            if mark is None:
                raise VerifierError("the reference task did not finish (too slow or out of memory?); check it with "
                                    "`evokernel tasks`, or raise --run-timeout (verify) / --memory-gb")
            raise VerifierError(f"the reference task failed: {mark.get('error_type')}: {str(mark.get('error', ''))[:200]}")
        if mark.get("phase") == "prepared":
            self.pending = False
            self.reference = mark
        return mark

    def _checked_reference(self) -> None:
        self.reference["profile_seed"] = self.profile_seed
        if not _valid_recipe(self.reference.get("recipe")):
            self.reference["recipe"] = None
        for i, t in enumerate(self.reference.get("trials", [])):
            t["dir"] = f"trial{i}"

    def drop(self) -> None:
        """Kill the worker (it failed, or cannot be trusted to be in step): it never goes back to the pool."""
        if self.held is not None:
            self.held[0].kill()
            self.held = None


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
