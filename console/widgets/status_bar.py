"""Two status lines: mode, threshold and verification first; then the run's facts."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from console.widgets.fmt import duration, idle, mark, mode_badge, section

STATE_STYLES = {
    "ready": "bold black on green", "starting": "bold black on yellow",
    "unhealthy": "bold black on dark_orange", "crashed": "bold white on red",
    "fatal": "bold white on red", "stopped": "bold white on grey42",
    "external": "bold black on cyan",
}
CHANGE_STYLES = {"pending": "bold yellow", "applied": "green", "refused": "bold red",
                 "unsupported": "bold red", "error": "bold red"}


def threshold_text(snap: dict) -> Text:
    spec, change = section(snap, "spec"), section(snap, "threshold_change")
    t = Text()
    n = spec.get("threshold")
    t.append(" N=", "bold")
    t.append("?" if n is None else str(n), "bold cyan")
    state = change.get("state")
    if state == "pending":
        t.append(f" \u2192 {change.get('requested')} pending", CHANGE_STYLES["pending"])
    elif state == "applied":
        t.append(" applied", CHANGE_STYLES["applied"])
    elif state in CHANGE_STYLES:
        detail = change.get("detail") or ""
        t.append(f" {state}{': ' + str(detail) if detail else ''}", CHANGE_STYLES[state])
    if spec.get("low_mark") is not None:
        t.append(f" (resume \u2264{spec.get('low_mark')})", "dim")
    force = spec.get("force")
    if force and force != "auto":
        t.append(f" forced {force.replace('_', '-')}", "bold magenta")
    return t


def verify_text(snap: dict) -> Text:
    verify = section(snap, "verify")
    t = Text(" verify ", "dim")
    for layer in verify.get("layers") or []:
        if isinstance(layer, dict):
            ch, style = mark(layer.get("status"))
            t.append(ch, style)
    summary = verify.get("summary") or "pending"
    t.append(f" {summary}", mark(summary)[1])
    return t


def line_one(snap: dict) -> Text:
    spec = section(snap, "spec")
    label, style = mode_badge(spec.get("mode"), idle=idle(snap))
    if section(snap, "server").get("reachable") is False and spec.get("mode"):
        label, style = f"{label.rstrip()}? ", "bold black on grey50"  # last known, not live
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(label, style)
    t.append_text(threshold_text(snap))
    t.append(f"  switches {spec.get('switch_count', 0) or 0}", "dim")
    t.append(" ")
    t.append_text(verify_text(snap))
    return t


def _short(text, limit: int = 48) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def line_two(snap: dict) -> Text:
    run, server = section(snap, "run"), section(snap, "server")
    state = run.get("state") or ("external" if snap.get("attached") else "stopped")
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f" {str(state).upper()} ", STATE_STYLES.get(state, "bold reverse"))
    t.append(f" {snap.get('profile') or snap.get('url') or '-'}", "bold")
    if snap.get("attached"):
        t.append(" (attached)", "cyan")
    if server.get("reachable") is False:
        t.append(f"  unreachable: {_short(server.get('error') or '?')}", "bold red")
    if run.get("fatal_reason"):
        t.append(f"  {_short(run.get('fatal_reason'))}", "bold red")
    elif run.get("last_error"):
        t.append(f"  {_short(run.get('last_error'))}", "bold red")
    if run.get("next_restart_in_s") is not None:
        t.append(f"  restart in {run.get('next_restart_in_s')} s", "yellow")
    fields = [("pid", run.get("pid")), ("port", run.get("port")),
              ("up", duration(run.get("uptime_s")) if run.get("uptime_s") is not None else None),
              ("restarts", run.get("restarts")), ("model", server.get("model")),
              ("TP", server.get("tp_size"))]
    for name, value in fields:
        if value is not None:
            t.append(f"  {name} ", "dim")
            t.append(str(value), "bold red" if name == "restarts" and value else "")
    return t


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 2; background: $panel; }"

    _last: tuple = ()

    def show(self, snap: dict) -> None:
        lines = (line_one(snap), line_two(snap))
        key = tuple((t.plain, tuple(t.spans)) for t in lines)
        if key != self._last:  # repaint only when what it says changed
            self._last = key
            self.update(Group(*lines))
