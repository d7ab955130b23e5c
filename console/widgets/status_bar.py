"""Two status lines: mode, threshold and verification first (and, when the server says so,
that the switch is off and why, or that its TP ranks disagree); then the run's facts. A
change repaints only the cells that differ (line_repaint.py): the uptime ticking sends its
digits, not the two lines."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.reactive import var
from textual.widget import Widget

from console.widgets.fmt import duration, mark, mode_badge
from console.widgets.line_repaint import repaint_changed_cells
from server_control.model.snapshot import EMPTY_SNAPSHOT, SessionSnapshot, SettingChange
from server_control.model.verification import Verification
from server_control.model.vocabulary import EXTERNAL_STATE, ChangeState, RunState
from server_control.protocol import runtime_settings
from server_control.protocol.runtime_settings import RuntimeSetting

STATE_STYLES: dict[str, str] = {
    RunState.READY: "bold black on green",
    RunState.STARTING: "bold black on yellow",
    RunState.UNHEALTHY: "bold black on dark_orange",
    RunState.CRASHED: "bold white on red",
    RunState.FATAL: "bold white on red",
    RunState.STOPPED: "bold white on grey42",
    EXTERNAL_STATE: "bold black on cyan",
}
CHANGE_STYLES: dict[str, str] = {
    ChangeState.PENDING: "bold yellow",
    ChangeState.APPLIED: "green",
    ChangeState.REFUSED: "bold red",
    ChangeState.UNSUPPORTED: "bold red",
    ChangeState.ERROR: "bold red",
    ChangeState.OVERRIDDEN: "bold red",
    ChangeState.ELSEWHERE: "bold yellow",  # elsewhere: a change this console did not make
    ChangeState.AUTO_TUNED: "cyan",  # the server's own tuner moved N (its evidence in the detail)
    ChangeState.NOT_KEPT: "bold red",
}


def other_setting(key: str | None) -> RuntimeSetting | None:
    """A runtime setting shown beside N, not in N's slot (every one but N), by its key."""
    setting = runtime_settings.by_key(key) if key is not None else None
    return setting if setting is not None and setting is not runtime_settings.THRESHOLD else None


def change_text(change: SettingChange | None, name: str = "") -> Text:
    """`` → 8 pending`` / `` applied`` / `` refused: why``; ``name`` for a setting other than N."""
    t = Text()
    state = change.state if change else None
    lead = f" {name}" if name else ""
    if change is not None and state == ChangeState.PENDING:
        t.append(f"{lead} \u2192 {change.requested} pending", CHANGE_STYLES["pending"])
    elif change is not None and state == ChangeState.APPLIED:
        t.append(f"{lead}{' ' + str(change.requested) if name else ''} applied", CHANGE_STYLES["applied"])
    elif change is not None and state == ChangeState.AUTO_TUNED:  # the detail says it: "auto-tuned 8 -> 10 (...)"
        t.append(f"{lead} {change.detail or state}", CHANGE_STYLES[state])
    elif change is not None and state in CHANGE_STYLES:
        t.append(f"{lead} {state}{': ' + change.detail if change.detail else ''}", CHANGE_STYLES[state])
    return t


def threshold_text(snap: SessionSnapshot) -> Text:
    spec, change = snap.spec, snap.last_change
    other = other_setting(change.key if change is not None else None)  # hysteresis, dwell, force: not in N's slot
    t = Text()
    t.append(" N=", "bold")
    t.append("?" if spec.threshold is None else str(spec.threshold), "bold cyan")
    if spec.threshold == 0:
        t.append(" never disable", "bold yellow")  # the rule is off: speculate at every batch
    if other is None:
        t.append_text(change_text(change))
    if spec.low_mark is not None and spec.threshold:
        t.append(f" (resume \u2264{spec.low_mark})", "dim")
    if spec.force and spec.force != "auto":
        t.append(f" forced {spec.force.replace('_', '-')}", "bold magenta")
    if spec.cold_draft_above:  # the cold-draft mark: target-only steps above it skip the draft (0: kept warm, unsaid)
        t.append(f" draft cold >{spec.cold_draft_above}", "blue")
        if spec.cold_steps:
            t.append(f" ({spec.cold_steps} cold)", "dim")
    if other is not None and change is not None:
        t.append(" ")
        t.append_text(change_text(change, other.word))
    return t


def verify_text(ver: Verification) -> Text:
    t = Text(" verify ", "dim")
    for layer in ver.layers:
        ch, style = mark(layer.status)
        t.append(ch, style)
    t.append(f" {ver.summary}", mark(ver.summary)[1])
    return t


def switches_text(snap: SessionSnapshot) -> Text:
    """The switch count, the rate lately; flapping said loudly, with the suggestion and its key."""
    spec, rate = snap.spec, snap.spec.switch_rate
    t = Text(f"  switches {spec.switch_count}", "dim")
    if rate.count:
        t.append(f" ({rate.per_min:.1f}/min)", "dim")
    if rate.flapping:
        t.append(f"  FLAPPING {rate.per_min:.0f}/min", "bold black on yellow")
        if rate.suggestion is not None:
            t.append(f" H: {rate.suggestion.name} {rate.suggestion.current}\u2192{rate.suggestion.value}", "bold yellow")
    return t


def line_one(snap: SessionSnapshot) -> Text:
    spec = snap.spec
    label, style = mode_badge(spec.mode, idle=snap.idle)
    health = spec.health
    if health.active is False:
        label, style = " SWITCH OFF ", "bold white on red"  # the server speculates at every batch
    t = Text(no_wrap=True, overflow="ellipsis")
    if snap.server.foreign:  # something answers on the port, but not this run's server: nothing of it shown
        t.append(" NOT THIS RUN'S SERVER ", "bold bright_white on magenta")
        t.append(" steering off", "bold magenta")
        t.append_text(verify_text(snap.verify))
        return t
    if not snap.server.reachable and snap.run.state == RunState.STOPPED and not snap.attached:
        t.append(" STOPPED ", STATE_STYLES[RunState.STOPPED])  # stopped on purpose: not an outage
        if spec.mode:
            t.append(f" last {label.strip()}", "dim")
    elif not snap.server.reachable and snap.server.error and snap.server.error != "not polled yet":
        t.append(" UNREACHABLE ", "bold bright_white on red")
        if spec.mode:  # last known, not live
            t.append(f" last {label.strip()}", "dim")
    else:
        t.append(label, style)
    t.append_text(threshold_text(snap))
    t.append_text(switches_text(snap))
    t.append(" ")
    t.append_text(verify_text(snap.verify))
    if health.rank_fault:
        t.append(f"  TP ranks disagree: {health.rank_fault}", "bold red")
    if health.active is False and health.reason:
        t.append(f"  off: {health.reason}", "bold red")
    return t


def _short(text: object, limit: int = 48) -> str:
    text = str(text)
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def line_two(snap: SessionSnapshot) -> Text:
    run, server = snap.run, snap.server
    state = run.state or (EXTERNAL_STATE if snap.attached else RunState.STOPPED)
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f" {state.upper()} ", STATE_STYLES.get(state, "bold reverse"))
    t.append(f" {snap.profile or snap.url or '-'}", "bold")
    if snap.attached:
        t.append(" (attached)", "cyan")
    if server.foreign:
        t.append(f"  {_short(server.error or '?', 96)}", "bold magenta")
    elif not server.reachable and state != RunState.STOPPED:
        t.append(f"  unreachable: {_short(server.error or '?')}", "bold red")
    if run.fatal_reason:
        t.append(f"  {_short(run.fatal_reason)}", "bold red")
    elif run.last_error:
        t.append(f"  {_short(run.last_error)}", "bold red")
    if run.next_restart_in_s is not None:
        t.append(f"  restart in {run.next_restart_in_s} s", "yellow")
    fields = [
        ("pid", run.pid),
        ("port", run.port),
        ("up", uptime(run.uptime_s) if run.uptime_s is not None else None),
        ("restarts", run.restarts),
        ("model", server.model),
        ("TP", server.tp_size),
    ]
    for name, value in fields:
        if value is not None:
            t.append(f"  {name} ", "dim")
            t.append(str(value), "bold red" if name == "restarts" and value else "")
            if name == "restarts" and run.last_exit:  # why it restarted: stays until an operator's launch
                t.append("  last exit ", "dim")
                t.append(exit_short(run.last_exit), "bold red")
    return t


def uptime(seconds: float) -> str:
    """Seconds for the first minute, then minutes: the line would otherwise change (and be
    sent to the terminal) every second for an hour."""
    if 60 <= seconds < 3600:
        return f"{int(seconds) // 60}m"
    return duration(seconds)


def exit_short(words: str) -> str:
    """``pid 42 exit code -9, killed by signal 9 at 10:00:02`` -> ``-9 SIGKILL 10:00:02 (pid 42)``."""
    import re
    import signal

    m = re.match(r"pid (\d+) exit code (-?\d+)(?:, killed by signal (\d+))?(.*?)(?: at (\d\d:\d\d:\d\d))?$", words)
    if m is None:
        return _short(words, 60)
    pid, code, sig, rest, at = m.groups()
    name = ""
    if sig:
        try:
            name = " " + signal.Signals(int(sig)).name
        except ValueError:
            name = f" signal {sig}"
    extra = _short(rest.strip(" ;,"), 24) if rest and rest.strip(" ;,") else ""
    return f"{code}{name}{' ' + extra if extra else ''}{' ' + at if at else ''} (pid {pid})"


class StatusBar(Widget):
    """Bound to the app's snapshot; repaints only the cells of its two lines that changed."""

    DEFAULT_CSS = "StatusBar { height: 2; background: $panel; }"

    snapshot: var[SessionSnapshot] = var(EMPTY_SNAPSHOT)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: tuple[Text, Text] = (Text(), Text())  # a plain attribute: see snapshot_view.py

    def render(self) -> Group:
        return Group(*self.lines)

    def watch_snapshot(self, snap: SessionSnapshot) -> None:
        lines = line_one(snap), line_two(snap)
        if lines == self.lines:
            return
        self.lines = lines
        if not repaint_changed_cells(self):  # two lines, always: no re-layout of the screen
            self.refresh()
