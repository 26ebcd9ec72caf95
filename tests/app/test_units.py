"""Pure pieces: theme persistence, the event fold, and lazy imports for a fast first paint."""

from __future__ import annotations

import subprocess
import sys

from support import snapshot_events

from evokernel_tui.themes import load_theme_name, next_theme, save_theme_name
from evokernel_tui.view import fold, timeline, view_at
from evokernel_tui.widgets.memory_table import q_cell


def test_theme_round_trip_and_bad_file(config_dir):
    assert load_theme_name() == "dark"
    save_theme_name("high-contrast")
    assert load_theme_name() == "high-contrast"
    (config_dir / "tui.json").write_text("{not json")
    assert load_theme_name() == "dark"
    assert next_theme("high-contrast") == "dark"


def test_fold_tracks_pending_accept_and_reject():
    base = snapshot_events()
    extra = [
        {"kind": "kernel", "data": {"version": 3, "author": "model", "source": "v3"}, "step": 3},
        {"kind": "pending_refinement", "data": {"version": 3, "gain": 1.5}, "step": 3},
    ]
    view = fold(base + extra)
    assert view.pending == "v3" and view.best_version == 2
    rejected = fold(base + extra + [{"kind": "rejected", "data": {"version": 3}, "step": 4}])
    assert rejected.pending is None and rejected.source == rejected.versions[2]
    accepted = fold(base + extra + [{"kind": "accepted", "data": {"version": 3}, "step": 4}])
    assert accepted.pending is None and accepted.source == "v3" and accepted.best_version == 3


def test_fold_values_points_and_timeline():
    events = snapshot_events()
    view = fold(events)
    rows = {m.item_id: m for m in view.memories}
    assert round(rows["seed-vec"].delta1, 2) == -0.12 and rows["seed-vec"].q1 == 0.30
    assert [(p.step, p.feasible) for p in view.points] == [(2, True)]
    assert view.speedup == 2.0 / 1.25
    assert timeline(events) == [0, 1, 2]
    assert view_at(events, 1).gates["compile"].state == "fail"


def test_q_cell_shows_the_change():
    assert q_cell(0.5, 0.12) == "0.50▲.12"
    assert q_cell(0.3, -0.1) == "0.30▼.10"
    assert q_cell(0.3, None) == "0.30" and q_cell(None, None) == "–"


def test_app_import_is_light():
    code = ("import sys, evokernel_tui.cli, evokernel_tui.app, evokernel_tui.commands.tui; "
            "print(','.join(m for m in ('torch', 'litellm', 'verifier.api', 'core.session') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_best_speedup_is_the_accepted_kernels_own_paired_figure():
    """A faster kernel that was rejected, and a later eager time measured under other load, must not
    move the headline: it is the accepted best's speedup from its own paired measurement."""
    from support import _verification

    base = snapshot_events()  # v2 accepted: 1.25 ms against 2.0 ms eager -> 1.6x
    faster = _verification(3, None, 0.5)
    faster["result"]["reference_ms"] = 4.0  # eager measured later, under load: 8x if divided naively
    extra = [
        {"kind": "kernel", "data": {"version": 3, "author": "model", "source": "v3"}, "step": 3},
        {"kind": "verification", "data": faster, "step": 3},
        {"kind": "pending_refinement", "data": {"version": 3, "gain": 2.5}, "step": 3},
        {"kind": "rejected", "data": {"version": 3}, "step": 4},
    ]
    view = fold(base + extra)
    assert view.best_version == 2
    assert view.speedup == 2.0 / 1.25 and view.best_ms == 1.25


def test_a_verified_line_says_how_far_the_kernel_is_from_the_memory_peak():
    """Speed of light in the activity log: the measured fraction of the machine's bandwidth peak beside the
    speedup; none for a noisy verdict (its figure is not claimed) or without a measured peak."""
    from evokernel_tui.view import SessionView, apply_verification

    record = {"gates": [{"name": "latency", "status": "pass", "seconds": 1.0, "reason": "", "detail": {}}],
              "feasible": True, "outcome": "feasible", "latency_ms": 4.3, "reference_ms": 3.8, "speedup": 0.886,
              "timing": {"speedup": 0.886, "lo": 0.87, "hi": 0.9, "noisy": False, "bandwidth_fraction": 0.857,
                         "bandwidth_peak_gbps": 2987.4}}
    line = apply_verification(SessionView(), record, 1)
    assert line.endswith("0.89× vs eager, 86% of memory bandwidth"), line
    noisy = {**record, "timing": {**record["timing"], "noisy": True}}
    assert "bandwidth" not in apply_verification(SessionView(), noisy, 2)
    bare = {**record, "timing": {"speedup": 0.886, "noisy": False}}
    assert "bandwidth" not in apply_verification(SessionView(), bare, 3)
