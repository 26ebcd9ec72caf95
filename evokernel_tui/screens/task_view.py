"""The Task view: the reference source, input shapes and dtypes, init arguments, tolerance, eager time.

Shapes come from running the reference once in a child process (a few seconds), in a thread worker
so the screen stays live; until then the view says it is reading them.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.widgets import Static

from evokernel_tui.screens.detail import TextModal


def verifier_tolerance(config: Any = None) -> dict[str, Any]:
    """atol, rtol and trials of the verification settings in use (the defaults when none are given)."""
    if config is None:
        from core.verdicts import VerifyConfig

        config = VerifyConfig()
    return {"atol": getattr(config, "atol", None), "rtol": getattr(config, "rtol", None),
            "trials": getattr(config, "trials", None)}


def task_degenerate(task: Any, config: Any = None, found: list[str] | None = None) -> list[str] | None:
    """What the Task view says about trivial answers: those found (by the session or a verdict), [] for a
    built-in task (none is degenerate: a test checks) or one the session checked, None when unknown."""
    if found:
        return list(found)
    checked = getattr(config, "degenerate", None)
    if checked is not None:
        return list(checked)
    from core.tasks import is_builtin

    return [] if is_builtin(task) else None


class TaskViewScreen(TextModal):
    """A modal over the session screen; `i` or escape closes it."""

    BINDINGS = [*TextModal.BINDINGS, ("i", "dismiss", "Close")]

    def __init__(self, task: Any, eager_ms: float | None = None, config: Any = None, probe: bool = True,
                 degenerate: list[str] | None = None) -> None:
        from evokernel_tui.commands.render import task_text

        self.task_obj, self.eager_ms = task, eager_ms
        self.tolerance = {**verifier_tolerance(config), "degenerate": task_degenerate(task, config, degenerate)}
        self.info: Any = None
        self.probe_error: str | None = None
        self._probe = probe
        super().__init__(f"Task · {task.name}", task_text(task, None, eager_ms=eager_ms, **self.tolerance,
                                                           probe_error=None if probe else "not probed"))

    def on_mount(self) -> None:
        if self._probe:
            self._read_shapes()

    @work(thread=True, exclusive=True, group="task-probe", name="task view: shapes")
    def _read_shapes(self) -> None:
        from core.tasks import TaskError, validate_task

        try:
            info, error = validate_task(self.task_obj, timeout_s=60), None
        except TaskError as exc:
            info, error = None, str(exc)
        except Exception as exc:  # the probe is foreign code: report it in the view, never crash
            info, error = None, f"{type(exc).__name__}: {exc}"
        self.app.call_from_thread(self.show_info, info, error)

    def show_info(self, info: Any, error: str | None) -> None:
        from evokernel_tui.commands.render import task_text

        self.info, self.probe_error = info, error
        body = task_text(self.task_obj, info, eager_ms=self.eager_ms, probe_error=error, **self.tolerance)
        self.query_one(".modal-body", Static).update(body)
