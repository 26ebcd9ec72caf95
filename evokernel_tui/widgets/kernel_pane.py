"""The kernel pane: the current kernel in an editable, highlighted editor, with a diff toggle."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from rich.syntax import Syntax
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static, TextArea


def unified_diff(before: str, after: str, before_name: str, after_name: str) -> str:
    """A unified diff of two kernel versions (empty when they are the same)."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), before_name, after_name, n=3
    )
    return "".join(lines)


class KernelPane(Vertical):
    """Shows the session's kernel; the person can type in it and submit the edit with ctrl+s."""

    BINDINGS = [
        Binding("ctrl+s", "submit", "Submit"),
        Binding("escape", "leave", "Leave editor"),
    ]

    ALLOW_MAXIMIZE = True  # z gives the kernel the whole screen
    show_diff: reactive[bool] = reactive(False)
    show_cpp: reactive[bool] = reactive(False)

    #: the compile gate's diagnostics from the last verification, marked in the C++ view
    diagnostics: reactive[list[str]] = reactive(list, init=False, repaint=False)

    @dataclass
    class Submitted(Message):
        """The person submitted the text in the editor as their edit."""

        source: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._loaded = ""
        self._previous = ""
        self._pending: str | None = None
        self._best: str | None = None
        self._author = ""
        self.cpp_shown: object = None
        self.border_title = "Kernel"

    def compose(self) -> ComposeResult:
        yield TextArea.code_editor("", language="python", id="kernel-editor", soft_wrap=False)
        with VerticalScroll(id="kernel-diff-scroll"):
            yield Static("", id="kernel-diff")
        with VerticalScroll(id="kernel-cpp-scroll"):
            yield Static("", id="kernel-cpp")

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda theme: self._match_theme(theme.dark))
        self._match_theme(self.app.current_theme.dark)

    def _match_theme(self, dark: bool) -> None:
        self.editor.theme = "vscode_dark" if dark else "github_light"

    @property
    def editor(self) -> TextArea:
        return self.query_one("#kernel-editor", TextArea)

    @property
    def edited(self) -> bool:
        """Whether the person has typed changes that are not yet submitted."""
        return self.editor.text != self._loaded

    def load(
        self, source: str, previous: str = "", pending: str | None = None, author: str = "", best: str | None = None
    ) -> None:
        """Show a new session state; the editor text is replaced only when the kernel itself changed."""
        if source != self._loaded:
            self._loaded = source
            if self.editor.text != source:  # after ctrl+s the text is already there: keep the cursor
                self.editor.load_text(source)
        self._previous, self._pending, self._author, self._best = previous, pending, author, best
        self._refresh_labels()
        if self.show_diff:
            self._render_diff()
        if self.show_cpp:
            self._render_cpp()

    def validate_diagnostics(self, diagnostics: list[str]) -> list[str]:
        return list(diagnostics)

    def watch_diagnostics(self) -> None:
        if self.show_cpp:
            self._render_cpp()

    def diff_text(self) -> str:
        """The diff the toggle shows: best kernel → pending refinement if one waits, else previous → current."""
        if self._pending is not None:
            return unified_diff(self._best or self._loaded, self._pending, "best", "pending refinement")
        return unified_diff(self._previous, self._loaded, "previous", "current")

    def watch_show_diff(self, show: bool) -> None:
        if show:
            self.show_cpp = False
        self.query_one("#kernel-diff-scroll").display = show
        self.editor.display = not (show or self.show_cpp)
        if show:
            self._render_diff()
        self._refresh_labels()

    def watch_show_cpp(self, show: bool) -> None:
        if show:
            self.show_diff = False
        self.query_one("#kernel-cpp-scroll").display = show
        self.editor.display = not (show or self.show_diff)
        if show:
            self._render_cpp()
        self._refresh_labels()

    def _render_cpp(self) -> None:
        from evokernel_tui.widgets.cpp_view import cpp_view

        self.cpp_shown = cpp_view(self.editor.text, self.diagnostics)
        self.query_one("#kernel-cpp", Static).update(self.cpp_shown)

    def _render_diff(self) -> None:
        text = self.diff_text() or "(no differences)"
        self.query_one("#kernel-diff", Static).update(Syntax(text, "diff", theme="ansi_dark", background_color="default"))

    def _refresh_labels(self) -> None:
        author = f" · {self._author}" if self._author else ""
        self.border_title = f"Kernel{author}"
        notes = []
        if self.show_diff:
            notes.append("diff vs pending" if self._pending is not None else "diff vs previous")
        elif self.show_cpp:
            notes.append("compiled C++ · c returns to the editor")
        elif self._pending is not None:
            notes.append("refinement pending")
        if self._loaded and self.edited:
            notes.append("edited · ctrl+s submits")
        self.border_subtitle = " · ".join(notes)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._refresh_labels()

    def action_submit(self) -> None:
        if self.show_diff or self.show_cpp:
            self.notify("Return to the editor (d or c) to edit and submit.", severity="warning")
            return
        if not self.edited and self._author != "starter":
            self.notify("Nothing to submit: the editor matches the current kernel.")
            return
        self.post_message(self.Submitted(self.editor.text))

    def action_leave(self) -> None:
        """esc: the keys go back to the app. Zoomed, nothing else is on screen to take them: no widget
        has focus then, so letters reach the app's bindings (t, q, z), never the kernel."""
        if self.screen.maximized is not None:
            self.screen.set_focus(None)
        else:
            self.screen.focus_next()
