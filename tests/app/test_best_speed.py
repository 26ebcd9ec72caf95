"""Issue 12: "best ×" has one definition and one way of being written. A noisy paired measurement is
marked (≈, "noisy") and a cached verdict says "cached, measured N min ago" in the app's header, in
`sessions`, in `replay`, and in the app's replay of the same recording."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from core.events import fold, read_events, speed_text
from evokernel_tui.app import EvoKernelApp
from evokernel_tui.cli import cli
from evokernel_tui.widgets.latency_plot import LatencyPlot, plot_title
from tests.fakes.verdicts import fake_verify, reply, write_replies


def _marked_verify(noisy: bool, cached_min: float | None):
    def verify(reference_source, candidate_source, backend="cpu", config=None, on_gate=None):
        result = fake_verify(reference_source, candidate_source, backend, config, on_gate)
        if result.speedup:
            result.timing = {"noisy": noisy, "lo": 1.2, "hi": 4.1, "threads": 2}
            if cached_min is not None:
                result.cached, result.measured_at = True, time.time() - cached_min * 60
        return result

    return verify


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Record a one-step draft whose only kernel is feasible at 0.8 ms (1.25× the fake eager 1.0 ms)."""
    import core.session.models

    def record(noisy: bool, cached_min: float | None):
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("COLUMNS", "200")  # rich tables at full width
        monkeypatch.setenv("EVOKERNEL_SESSIONS", str(tmp_path / "sessions"))
        monkeypatch.setattr(core.session.models, "default_verify", _marked_verify(noisy, cached_min))
        replies = write_replies(tmp_path / "r.json", [reply("feasible", 0.8)])
        res = CliRunner().invoke(cli, ["draft", "relu", "--model", f"scripted:{replies}", "--no-memory",
                                       "--steps", "1", "--out", str(tmp_path / "k.py")], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        (path,) = (tmp_path / "sessions").iterdir()
        return path, res.output

    return record


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False, terminal_width=200)
    assert res.exit_code == 0, res.output
    return res.output


async def _app_header(path, gates: bool = False) -> str:
    from evokernel_tui.widgets.gate_panel import GatePanel

    app = EvoKernelApp(replay_events=[e.to_dict() for e in read_events(path)], theme_name="dark")
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.press("end")
        await pilot.pause()
        return str(app.screen.query_one(GatePanel if gates else LatencyPlot).border_title)


async def test_noisy_best_is_marked_in_app_sessions_and_replay(recorded):
    path, draft_out = recorded(noisy=True, cached_min=None)
    best = fold(read_events(path)).best
    assert speed_text(best) == "≈1.25× (noisy)" and speed_text(best, "x") == "≈1.25x (noisy)"
    assert "≈1.25x (noisy) vs eager" in draft_out
    assert "≈1.25x (noisy)" in _cli("sessions")
    assert "best v1 ≈1.25x (noisy)" in _cli("replay", path.name)
    assert await _app_header(path) == "Latency · best ≈1.25× vs eager (noisy)"
    from core.session import Session
    from evokernel_tui.screens.versions import version_rows

    session = Session.open(path, lock=False)
    (row,) = version_rows(session, [e.to_dict() for e in read_events(path)])
    assert row.cells()[7] == "≈1.25×"                                      # the versions table marks it too
    # issue 34: the interval travels with the figure: the version's own view (enter) names it
    assert row.heading().endswith("· ≈1.25× [1.20–4.10] noisy"), row.heading()


async def test_cached_best_says_when_it_was_measured(recorded):
    path, _ = recorded(noisy=False, cached_min=7)
    assert "1.25x (cached, measured 7 min ago)" in _cli("sessions")
    assert "best v1 1.25x (cached, measured 7 min ago)" in _cli("replay", path.name)
    assert await _app_header(path) == "Latency · best 1.25× vs eager (cached, measured 7 min ago)"
    assert await _app_header(path, gates=True) == "Gates · cached, measured 7 min ago"  # the gates say so too
    # the age is counted from when the verdict was recorded, so a replay next week says the same
    events = read_events(path)
    line = next(e for e in fold(events).history if e.version == 1)
    assert line.timing_note == "cached, measured 7 min ago"
    from evokernel_tui.view import fold as fold_view

    verified = [a.text for a in fold_view(events).activity if a.kind == "verification"]
    assert verified and "1.25× vs eager (cached, measured 7 min ago); cached verdict" in verified[-1]


async def test_settled_fresh_best_is_a_plain_number(recorded):
    path, _ = recorded(noisy=False, cached_min=None)
    assert await _app_header(path) == "Latency · best 1.25× vs eager"
    assert await _app_header(path, gates=True) == "Gates"
    assert "1.25x" in _cli("sessions") and "noisy" not in _cli("sessions")


def test_plot_title_forms():
    assert plot_title(None, None) == "Latency · no feasible kernel yet"
    assert plot_title("", 1.25) == "Latency · best 1.2500 ms"
    assert plot_title(1.6, 1.25) == "Latency · best 1.60× vs eager"
    assert plot_title("≈1.60× (noisy)", 1.25) == "Latency · best ≈1.60× vs eager (noisy)"
