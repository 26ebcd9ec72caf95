"""The session screen: kernel, gates, memories, latency and activity panes at once."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer

from evokernel_tui.screens.detail import GateDetailScreen, MemoryDetailScreen
from evokernel_tui.view import SessionView
from evokernel_tui.widgets.activity_log import ActivityLog
from evokernel_tui.widgets.gate_panel import GatePanel
from evokernel_tui.widgets.kernel_pane import KernelPane
from evokernel_tui.widgets.latency_plot import LatencyPlot
from evokernel_tui.widgets.memory_table import MemoryTable
from evokernel_tui.widgets.mode_banner import ModeBanner


class SessionScreen(Screen):
    """The five panes, filled from a `SessionView`; live and replay screens differ only in controls."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("d", "toggle_diff", "Diff"),
        Binding("c", "toggle_cpp", "C++"),
        Binding("z", "zoom", "Zoom"),
        # before the editor's own esc (a code editor moves focus on esc, which finds only itself when zoomed);
        # each is enabled only where it applies (`check_action`), else esc is the focused widget's
        Binding("escape", "leave_editor", "Leave editor", priority=True),
        Binding("escape", "unzoom", "Unzoom", show=False, priority=True),
    ]
    #: esc in the zoomed editor leaves the editor and keeps the zoom, so the next letters typed are the
    #: app's keys; esc again (or z) brings the other panes back
    ESCAPE_TO_MINIMIZE = False

    def compose(self) -> ComposeResult:
        yield ModeBanner(id="banner")
        with Horizontal(id="top"):
            yield KernelPane(id="kernel")
            with Vertical(id="side"):
                yield GatePanel(id="gates")
                yield MemoryTable(id="memories")
                yield LatencyPlot(id="latency")
        yield ActivityLog(id="activity")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(GatePanel).focus()

    def focus_editor(self) -> None:
        self.query_one(KernelPane).editor.focus()

    def show(self, view: SessionView) -> None:
        """Push one state down into every pane."""
        pane = self.query_one(KernelPane)
        pane.load(view.source, view.previous, view.pending, view.author, view.best_source)
        compile_gate = view.gates.get("compile")
        pane.diagnostics = list((compile_gate.detail if compile_gate else {}).get("diagnostics") or [])
        note = " · ".join(part for part in (view.task_note, view.progress_note or view.verdict_note) if part)
        gates = self.query_one(GatePanel)
        gates.degenerate, gates.note, gates.blocked = view.degenerate, note, view.blocked
        gates.gates = view.gate_list()
        table = self.query_one(MemoryTable)
        table.stage = view.stage
        table.memories = view.memories
        plot = self.query_one(LatencyPlot)
        plot.best = (view.speed_text, view.best_ms)
        plot.series = (tuple(view.points), view.reference_ms, view.compiled_ms)
        self.query_one(ActivityLog).totals = (view.stage, view.tokens, view.cost, view.manual)
        self.sub_title = f"{view.task} · {view.backend} · {view.stage}" if view.task else ""

    def action_zoom(self) -> None:
        """Give the kernel pane the whole screen (on 80×24 it gets the full width), or bring the other
        panes back. Gates, memories and the activity stay one key away: z again."""
        if self.maximized is not None:
            self.action_unzoom()
            return
        pane = self.query_one(KernelPane)
        self.maximize(pane, container=False)
        if not (pane.show_diff or pane.show_cpp):
            pane.editor.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "leave_editor":
            return self.focused is self.query_one(KernelPane).editor
        if action == "unzoom":
            return self.maximized is not None and self.focused is not self.query_one(KernelPane).editor
        return True

    def action_leave_editor(self) -> None:
        """esc in the editor: the keys go back to the app (zoomed too)."""
        self.query_one(KernelPane).action_leave()

    def action_unzoom(self) -> None:
        """Bring the other panes back; the keys go to the gates unless a pane already has them."""
        if self.maximized is None:
            return
        self.minimize()
        if self.focused is None:
            self.query_one(GatePanel).focus()

    def action_toggle_diff(self) -> None:
        pane = self.query_one(KernelPane)
        pane.show_diff = not pane.show_diff

    def action_toggle_cpp(self) -> None:
        """The C++ the kernel compiles, numbered like the compiler's diagnostics, failing lines marked."""
        pane = self.query_one(KernelPane)
        pane.show_cpp = not pane.show_cpp

    @on(GatePanel.GateSelected)
    def _gate_detail(self, message: GatePanel.GateSelected) -> None:
        self.app.push_screen(GateDetailScreen(message.gate))

    @on(MemoryTable.MemorySelected)
    def _memory_detail(self, message: MemoryTable.MemorySelected) -> None:
        self.app.push_screen(MemoryDetailScreen(message.memory))

    @on(MemoryTable.UsedToggled)
    def _mark_used(self, message: MemoryTable.UsedToggled) -> None:
        calls = getattr(self.app, "calls", None)  # the app's `SessionCalls` (it does nothing without a session)
        if calls is not None:
            calls.mark_memory_used(message.memory.item_id, not message.memory.used)


class MainScreen(SessionScreen):
    """The live session; every control is an app action so the command palette can offer it too."""

    BINDINGS = [
        # the footer shows the keys of the loop; the rest are in the command palette (ctrl+p) and the README
        Binding("s", "app.step", "Step"),
        Binding("n", "app.run_steps", "Run"),
        Binding("p", "app.pause", "Pause", show=False),
        Binding("a", "app.accept", "Accept"),
        Binding("r", "app.reject", "Reject"),
        Binding("v", "app.reverify", "Verify"),
        Binding("e", "app.edit_external", "$EDITOR", show=False),
        Binding("g", "app.switch_stage", "Stage", show=False),
        Binding("o", "app.open_task", "Open", show=False),
        Binding("i", "app.show_task", "Task", show=False),  # at 80 columns the footer holds the loop, zoom and quit
        Binding("h", "app.show_versions", "Hist", show=False),
        Binding("x", "app.export", "Save", show=False),
        Binding("ctrl+s", "submit_kernel", "Submit kernel", show=False),
    ]

    def action_submit_kernel(self) -> None:
        """ctrl+s submits the kernel pane from anywhere on the screen, not only while typing in it."""
        self.query_one(KernelPane).action_submit()

    def show_manual(self, manual: bool) -> None:
        self.query_one(ModeBanner).manual = manual
