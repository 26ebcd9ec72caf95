"""Rich renderings shared by the commands: the gate table and speedup text."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text

from core.verdicts import GATE_TITLES, VerificationResult, library_line

LIGHTS = {"pass": ("●", "bold green"), "fail": ("●", "bold red"), "skip": ("○", "dim"), "running": ("◌", "yellow")}


def latency_figures(detail: dict) -> str:
    """The paired measurement in one line: both medians with their spread, rounds × calls, and the
    speedup with its 95% interval ("noisy" when the interval stayed wide)."""
    med, ref, sp = detail.get("median_ms"), detail.get("reference_ms"), detail.get("speedup")
    spread = detail.get("cand_iqr_ms", detail.get("iqr_ms"))
    text = f"{med:.3f} ms" + (f" (IQR {spread:.3f})" if spread is not None else "")
    if ref:
        text += f" vs eager {ref:.3f} ms"
        if detail.get("ref_iqr_ms") is not None:
            text += f" (IQR {detail['ref_iqr_ms']:.3f})"
    if sp:
        text += f" → {sp:.2f}×"
        if detail.get("lo") and detail.get("hi"):
            text += f" [{detail['lo']:.2f}–{detail['hi']:.2f}]"
    if detail.get("rounds"):
        text += f", {detail['rounds']} rounds × {detail.get('calls_per_round', 1)} calls"
    elif detail.get("runs"):
        text += f", {detail['runs']} runs"
    if detail.get("noisy"):
        text += ", noisy: no speed claim"
    return text


def gate_table(result: VerificationResult, title: str | None = None) -> Table:
    """One row per gate: a light, the gate, its status, the time it took and the reason."""
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("", width=1)
    table.add_column("gate", style="bold")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("reason / figures", overflow="fold")
    for g in result.gates:
        light, style = LIGHTS.get(g.status, ("?", ""))
        reason = g.reason
        if g.status == "pass" and g.name == "latency" and g.detail.get("median_ms") is not None:
            reason = latency_figures(g.detail)
            if g.detail.get("speedup_vs_compile"):
                reason += f", {g.detail['speedup_vs_compile']:.2f}× vs torch.compile"
            if result.bandwidth_text(even_noisy=True):
                reason += "\n" + result.bandwidth_text(even_noisy=True) + (
                    f" (peak {g.detail['bandwidth_peak_gbps']:.1f} GB/s)" if g.detail.get("bandwidth_peak_gbps") else "")
        elif g.status == "pass" and g.name == "correctness":
            reason = f"{g.detail.get('trials')} trials, max abs err {g.detail.get('max_abs', 0):.2e}"
        elif g.status == "pass" and g.name == "compile":
            builds = g.detail.get("builds", [])
            reason = ", ".join(f"{b['name']} ({'cached' if b.get('cache_hit') else b.get('layout')})" for b in builds)
        elif g.status == "pass" and g.name == "profile":
            top = g.detail.get("top_ops", [])[:3]
            reason = ", ".join(f"{r['name']} {r['self_ms']:.2f} ms" for r in top)
        elif g.status == "pass" and g.name == "anti_hacking" and g.detail.get("reported"):
            reason = "\n".join(x for x in (g.reason, library_line(g.detail)) if x)
        elif g.status == "fail":
            extra = [g.detail["mismatch"]] if g.detail.get("mismatch") else []
            extra += g.detail.get("diagnostics", [])[:5]
            reason = "\n".join([reason, *extra])
        table.add_row(Text(light, style=style), GATE_TITLES.get(g.name, g.name), Text(g.status, style=style),
                      f"{g.seconds:.2f} s", Text(reason))
    return table


def speed_text(result: VerificationResult) -> str:
    """`1.84× vs eager [1.71–1.97], 2 threads, 3.1 GB/s (cached, measured 4 min ago)`; "" without a speedup.

    A noisy measurement makes no speed claim: it says so instead of printing a number as if it held."""
    sp = result.speedup
    if not sp:
        return ""
    t = result.timing or {}
    label = result.timing_label()
    if result.noisy:
        return f"speed not settled (noisy: {sp:.2f}× with 95% interval [{t.get('lo', 0):.2f}–{t.get('hi', 0):.2f}])" + (
            f" ({label})" if label != "noisy" else "")
    parts = [f"{sp:.2f}× vs eager"]
    if t.get("lo") is not None and t.get("hi") is not None:
        parts[0] += f" [{t['lo']:.2f}–{t['hi']:.2f}]"
    if t.get("threads"):
        parts.append(f"{t['threads']} threads")
    if t.get("gbps"):
        parts.append(f"{t['gbps']:.1f} GB/s")
    if result.bandwidth_text():
        parts.append(result.bandwidth_text())
    text = ", ".join(parts)
    return text + (f" ({label})" if label else "")


def verdict_line(result: VerificationResult) -> Text:
    if result.feasible:
        extra = speed_text(result)
        return Text("feasible" + (f", {extra}" if extra else ""), style="bold green")
    failed = result.failed_gate
    name = GATE_TITLES.get(failed.name, failed.name) if failed else "?"
    return Text(f"not feasible: {name} failed", style="bold red")


def task_rows(task, info=None, *, atol: float | None = None, rtol: float | None = None, trials: int | None = None,
              eager_ms: float | None = None, probe_error: str | None = None,
              degenerate: list[str] | None = None) -> list[tuple[str, str]]:
    """(label, value) rows describing a task: what the Task view and `evokernel tasks show` print.

    `info` is a `core.tasks.TaskInfo` from running the reference once (shapes, init arguments, one
    timing); `eager_ms` is the verifier's median for eager PyTorch when a session has measured it;
    `degenerate` the trivial answers that pass the task ([]: none; None: not known)."""
    rows = [("task", f"{task.name} · level {task.level} · {task.category or 'uncategorised'}")]
    if task.description:
        rows.append(("what", task.description))
    if getattr(task, "path", None):
        path = Path(str(task.path))
        builtin = path.parent.name == "builtin_tasks"
        rows.append(("file", f"built-in: core/builtin_tasks/{path.name}" if builtin else str(path)))
    if info is not None:
        rows.append(("inputs", "; ".join(spec.short() for spec in info.inputs) or "none"))
        rows.append(("outputs", "; ".join(spec.short() for spec in info.outputs) or "none"))
        rows.append(("init args", ", ".join(str(a) for a in info.init_args) or "none"))
        rows.append(("parameters", f"{info.parameters:,}"))
    elif probe_error:
        rows.append(("shapes", f"unknown: {probe_error}"))
    else:
        rows.append(("shapes", "running the reference once to read them…"))
    if trials is not None or atol is not None:
        from core.verdicts import describe_tolerance

        extra = f", {trials} trials with distinct seeds" if trials else ""
        rows.append(("tolerance", f"{describe_tolerance(atol, rtol)}{extra}"))
    if degenerate:
        from core.verdicts import describe_degenerate

        rows.append(("degenerate", f"yes: {describe_degenerate(degenerate).removeprefix('degenerate: ')} at this "
                                   "tolerance, so answers are judged against the spread of the reference output"))
    elif degenerate is not None:
        rows.append(("degenerate", "no: zeros, a constant, the mean or an input-independent output do not pass"))
    timings = []
    if eager_ms:
        timings.append(f"{eager_ms:.4g} ms eager (the verifier's median in this session)")
    if info is not None and info.reference_ms:
        timings.append(f"{info.reference_ms:.4g} ms (one run while reading shapes)")
    if timings:
        rows.append(("eager time", "; ".join(timings)))
    return rows


def task_text(task, info=None, **kw) -> str:
    """`task_rows` as aligned plain text, then the reference source with line numbers."""
    rows = task_rows(task, info, **kw)
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    source = task.source.splitlines()
    lines += ["", "Reference (Model, get_inputs, get_init_inputs):"]
    lines += [f"{n:>3}  {line}" for n, line in enumerate(source, start=1)]
    return "\n".join(lines)


def profile_table(rows: list[dict], title: str = "Profile: top ops by self time") -> Table:
    """Profiler rows sorted by self time, with each op's share; the custom kernel (`kernel::…`) marked."""
    ordered = sorted((r for r in rows if isinstance(r, dict)), key=lambda r: -float(r.get("self_ms") or 0.0))
    total = sum(float(r.get("self_ms") or 0.0) for r in ordered) or 0.0
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("op", overflow="fold")
    table.add_column("self ms", justify="right")
    table.add_column("share", justify="right")
    table.add_column("calls", justify="right")
    for r in ordered:
        name = str(r.get("name", "?"))
        ms = float(r.get("self_ms") or 0.0)
        ours = name.startswith("kernel::")
        share = f"{100 * ms / total:.1f}%" if total else "-"
        table.add_row(Text(("★ " if ours else "") + name, style="bold green" if ours else ""), f"{ms:.3f}", share,
                      str(r.get("calls", "")))
    if ordered:
        custom = sum(float(r.get("self_ms") or 0.0) for r in ordered if str(r.get("name", "")).startswith("kernel::"))
        table.caption = (f"★ your kernel: {100 * custom / total:.1f}% of the profiled self time" if total and custom
                         else "no custom kernel (kernel::…) in the profile")
        table.caption_justify = "left"
    return table
