"""The verifier's settings are `VerifyConfig` fields (issue 32), not `extra` string keys: a session saved
before the change reads back meaning the same, a caller written for the old form is told, and no product
module reads a setting from `extra` any more (a source scan, with the old lines it must catch)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from core.session import Session
from core.session.models import SAVED_VERIFIER_SETTINGS, config_from_meta, verifier_settings_meta
from core.tasks import load_task
from core.verifying import make_config, tolerance_text, with_degeneracy
from tests.fakes.verdicts import fake_verify
from verifier.clock.paired_calls import flush_bytes_of, gpu_loop_of, wake_enabled
from verifier.clock.rounds import WARMUP_ROUNDS, sets_by_file
from verifier.config import LEGACY_EXTRA_KEYS, VerifyConfig, lift_legacy_extra
from verifier.run.timed_calls import own_stub_enabled, speed_of_light_detail

ROOT = Path(__file__).resolve().parents[2]

#: session.json's "verifier" settings as the version before the fields wrote them (main at a63e35f:
#: `verifier_settings_meta` of `make_config("v0", memory_gb=4.0, threads=2)` after `with_degeneracy(c,
#: ["zeros", "input 0 passed through"], ["normal"])` and every other extra key set), printed, not typed in
OLD_FORMAT = json.loads("""{"trials": 5, "atol": 0.01, "rtol": 0.01, "seed": 42, "memory_gb": 4.0, "threads": 2,
"run_timeout_s": 120.0, "build_timeout_s": 300.0, "timing_budget_s": 5.0, "input_distributions": ["task", "normal"],
"policy": "kernelbench", "allow": [], "gpu_memory_fraction": 0.9, "time_kernels": true, "compare_compile": false,
"ncu": false, "magnitude_probe": true, "shape_probe": true, "extra": {"tolerance": "v0", "degenerate": ["zeros"],
"pass_through": ["input 0 passed through"], "separated_by": ["normal"], "l2_flush_mb": 128, "gpu_loop": "async",
"seeded_inputs": false, "speed_of_light": false, "warmup_rounds": 0, "timing_sets": "seeds", "own_stub": "off",
"wake": "on", "bandwidth_peak_gbps": 8.0, "flops_peak_gflops": 100.0, "device_compare": false, "note": "kept"}}""")


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch):
    for name in ("EVOKERNEL_GPU_LOOP", "EVOKERNEL_L2_FLUSH_MB", "EVOKERNEL_WAKE", "EVOKERNEL_OWN_STUB", "EVOKERNEL_GPU_PAD_US"):
        monkeypatch.delenv(name, raising=False)


def _expect_old_meaning(config: VerifyConfig) -> None:
    """What the old version made of OLD_FORMAT, through the functions that read each setting."""
    assert (config.tolerance, config.degenerate, config.pass_through, config.separated_by) == (
        "v0", ["zeros"], ["input 0 passed through"], ["normal"])
    assert flush_bytes_of(config) == 128 * 1024**2 and gpu_loop_of(config) == "async"
    assert wake_enabled("cpu", config) and not own_stub_enabled("cpu", config)
    assert not sets_by_file("cpu", 1024, config) and config.warmup_rounds == 0
    assert speed_of_light_detail(config, {}, "cpu", 1000, 10.0, 5.0) == {}  # speed_of_light off
    assert (config.seeded_inputs, config.device_compare) == (False, False)
    assert (config.bandwidth_peak_gbps, config.flops_peak_gflops) == (8.0, 100.0)
    assert "v0: atol=rtol=0.01" in tolerance_text(config) and "scaled by the spread" in tolerance_text(config)
    assert (config.memory_gb, config.threads, config.input_distributions) == (4.0, 2, ["task", "normal"])
    assert config.extra == {"note": "kept"}  # free-form data stays where it was


def test_an_old_format_session_setting_reads_back_as_the_same_fields():
    _expect_old_meaning(config_from_meta(json.loads(json.dumps(OLD_FORMAT))))


def test_a_session_saved_before_the_fields_reopens_with_its_settings(tmp_path):
    """The whole path: a session.json holding the old form, reopened by `Session.open` (what `resume` does)."""
    s = Session.create(load_task("relu"), model=None, memory=None, root=tmp_path / "sessions", verify_fn=fake_verify)
    path = s.path
    s.close()
    meta = json.loads((path / "session.json").read_text())
    meta["settings"]["verifier"] = OLD_FORMAT
    (path / "session.json").write_text(json.dumps(meta))
    again = Session.open(path, verify_fn=fake_verify, lock=False)
    _expect_old_meaning(again.verify_config)


def test_the_old_booleans_read_as_the_old_version_read_them():
    """Those three were "anything but False is on" (a hand-edited 0 or "no" was on); a field recorded in its
    own right wins over an old key; a file without old keys is passed through untouched."""
    lifted = lift_legacy_extra({"extra": {"seeded_inputs": 0, "device_compare": "no", "speed_of_light": False,
                                          "gpu_loop": "async"}, "gpu_loop": "sync"})
    assert (lifted["seeded_inputs"], lifted["device_compare"], lifted["speed_of_light"]) == (True, True, False)
    assert lifted["gpu_loop"] == "sync" and lifted["extra"] == {}
    plain = {"trials": 3, "extra": {"note": 1}}
    assert lift_legacy_extra(plain) is plain


def test_new_sessions_record_every_moved_setting_and_read_it_back():
    """Every setting that used to ride in `extra` (and so was saved with it) is saved as a field."""
    assert set(LEGACY_EXTRA_KEYS) <= set(SAVED_VERIFIER_SETTINGS)
    config = with_degeneracy(make_config("v0", memory_gb=4.0, threads=2), ["zeros", "input 0 passed through"],
                             ["normal"])
    for name, value in dict(l2_flush_mb=128, gpu_loop="async", seeded_inputs=False, speed_of_light=False,
                            warmup_rounds=0, timing_sets="seeds", own_stub="off", wake="on", bandwidth_peak_gbps=8.0,
                            flops_peak_gflops=100.0, device_compare=False, extra={"note": "kept"}).items():
        setattr(config, name, value)
    _expect_old_meaning(config)
    _expect_old_meaning(config_from_meta(json.loads(json.dumps(verifier_settings_meta(config)))))
    assert config_from_meta(verifier_settings_meta(VerifyConfig())).to_dict() == VerifyConfig().to_dict()


def test_the_defaults_are_the_old_defaults():
    """No key in `extra` meant: clock and data path at the product's defaults, nothing probed yet."""
    config = VerifyConfig()
    assert config.degenerate is None and config.tolerance is None and not config.pass_through
    assert flush_bytes_of(config) is None and gpu_loop_of(config) == "sync" and not wake_enabled("cpu", config)
    assert own_stub_enabled("cpu", config) and not own_stub_enabled("cuda", config)
    assert sets_by_file("cpu", 1024, config) and not sets_by_file("cuda", 1024, config)
    assert config.warmup_rounds is None and WARMUP_ROUNDS == 2
    assert config.seeded_inputs and config.device_compare and config.speed_of_light


def test_a_caller_still_writing_extra_keys_is_told_the_field():
    """The candidate that would defeat the move: code (an older branch, a script) still passing
    `extra={"gpu_loop": ...}`, which nothing reads any more and would silently time with "sync"."""
    with pytest.raises(ValueError, match="gpu_loop=, l2_flush_mb="):
        VerifyConfig(extra={"l2_flush_mb": 64, "gpu_loop": "async"})
    assert VerifyConfig(extra={"experiment": "a"}).extra == {"experiment": "a"}


# --- no product module reads a setting from `extra` ---------------------------------------------------

PRODUCT = ("verifier", "core", "evokernel_tui")
#: the one module that may: it defines the fields and lifts old files into them
EXEMPT = {"verifier/config.py"}


def extra_reads(source: str) -> list[str]:
    """The places in `source` that read `extra` off a verifier config: `<...config...>.extra` in any form,
    `getattr(<...config...>, "extra")`, or a moved setting's name looked up in something called `extra`
    (`extra = config.extra; extra.get("gpu_loop")`). Payload and bench `extra`s (other names) pass."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr == "extra" and "config" in ast.unparse(node.value).lower() or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value == "extra"
              and "config" in ast.unparse(node.args[0]).lower()):
            found.append(ast.unparse(node))
        else:
            key, base = None, None
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                key, base = node.slice.value, node.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr in ("get", "pop", "setdefault") and node.args
                  and isinstance(node.args[0], ast.Constant)):
                key, base = node.args[0].value, node.func.value
            elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant) and len(node.comparators) == 1:
                key, base = node.left.value, node.comparators[0]
            if key in LEGACY_EXTRA_KEYS and base is not None and ast.unparse(base).endswith("extra"):
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("old_line", [
    # lines of the version before the fields, each a way of reading a setting from `extra`
    'mode = str((config.extra or {}).get("timing_sets", "auto"))',
    'mode = str((getattr(config, "extra", None) or {}).get("gpu_loop") or "sync")',
    'spread = output_spread(w) if (self.config.extra or {}).get("degenerate") else None',
    'degenerate = verify_config.extra.get("degenerate")',
    'found = config.extra["degenerate"]',
    'if "degenerate" not in config.extra:\n    pass',
    'extra = getattr(getattr(session, "verify_config", None), "extra", None) or {}',
    'extra = thing.extra or {}\nif extra.get("speed_of_light", True) is False:\n    pass',
    'config.extra["tolerance"] = tolerance',
])
def test_the_scan_catches_each_old_way_of_reading_extra(old_line):
    assert extra_reads(old_line), old_line


def test_the_scan_leaves_other_extras_alone():
    assert not extra_reads('self.to = str(self.extra["stage"])\nbench.extra["recorded"] = []\n'
                           'extra = {"probe": 1}\nreturn {**self.extra, **out}\nextra.update(recipe=1)')


def test_no_product_module_reads_a_setting_from_extra():
    found = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in EXEMPT:
                found += [f"{rel}: {hit}" for hit in extra_reads(path.read_text())]
    assert not found, "read the VerifyConfig field instead:\n" + "\n".join(found)


def test_a_whole_session_created_now_resumes_with_its_probe_results(tmp_path):
    """The task probe's findings are fields, saved and read back with the session (no probe rerun)."""
    config = with_degeneracy(make_config("v0"), ["zeros"], [])
    s = Session.create(load_task("relu"), model=None, memory=None, root=tmp_path / "sessions", verify_fn=fake_verify,
                       verify_config=config)
    path = s.path
    s.close()
    again = Session.open(path, verify_fn=fake_verify, lock=False)
    assert (again.verify_config.tolerance, again.verify_config.degenerate) == ("v0", ["zeros"])
    saved = json.loads((path / "session.json").read_text())["settings"]["verifier"]
    assert saved["degenerate"] == ["zeros"] and saved["extra"] == {}


def test_a_new_setting_is_saved_with_the_session_unless_named_as_not_saved():
    """The saved settings are derived from `VerifyConfig`'s fields (issue 32: a second list of names beside
    the fields drifted): each saved field set to a value other than its default comes back from the
    session's file, and only the named machine and test-only settings are left out."""
    import dataclasses

    from core.session.models import NOT_SAVED_VERIFIER_SETTINGS

    names = {f.name for f in dataclasses.fields(VerifyConfig)}
    assert names >= NOT_SAVED_VERIFIER_SETTINGS  # a renamed field would otherwise be saved silently
    assert set(SAVED_VERIFIER_SETTINGS) == names - NOT_SAVED_VERIFIER_SETTINGS
    other = {int: 7, float: 7.5, str: "x", bool: None, list: ["a"], dict: {"k": 1}, type(None): None}
    changed = {}
    for name, kinds in SAVED_VERIFIER_SETTINGS.items():
        default = getattr(VerifyConfig(), name)
        if bool in kinds:
            value = not default
        else:
            value = next(other[k] for k in kinds if other[k] is not None and other[k] != default)
        changed[name] = value
    config = dataclasses.replace(VerifyConfig(), **changed)
    back = config_from_meta(json.loads(json.dumps(verifier_settings_meta(config))))
    assert {name: getattr(back, name) for name in changed} == changed


def test_the_gpu_pad_is_a_field_with_the_environment_as_fallback(monkeypatch):
    """The pad before each timed GPU call travels as cycles at the nominal clock, so both sides spin alike:
    the field first, then EVOKERNEL_GPU_PAD_US, else none; a bad value is no pad, never an error."""
    from verifier.clock.paired_calls import PAD_CYCLES_PER_US, gpu_pad_cycles_of

    assert gpu_pad_cycles_of(VerifyConfig()) == 0
    assert gpu_pad_cycles_of(VerifyConfig(gpu_pad_us=150)) == 150 * PAD_CYCLES_PER_US
    monkeypatch.setenv("EVOKERNEL_GPU_PAD_US", "40")
    assert gpu_pad_cycles_of(VerifyConfig()) == 40 * PAD_CYCLES_PER_US
    assert gpu_pad_cycles_of(VerifyConfig(gpu_pad_us=0)) == 0  # the field wins, even at no pad
    monkeypatch.setenv("EVOKERNEL_GPU_PAD_US", "fast")
    assert gpu_pad_cycles_of(VerifyConfig()) == 0
