"""Every action of the console and its keys, as data.

One table feeds the key bindings (footer), the help screen (`?`) and the command palette
(`ctrl+p`), so the three can never disagree. Each action names its ``owner``: the node that
runs the action ("screen": the server screen, console/screens/server.py; "log": its log
view; "app": Textual's own app actions, bound on the server screen as ``app.<action>``), so
a key is bound where it acts (``bindings_for(owner)``) and the palette runs it there (as
harlequin's ``target``); ``needs_owner`` marks the actions only the server's owner may take (start,
stop, restart: off when the console is attached to a server it does not own; as k9s's
``Dangerous``). The binding ids are the action names: a user keymap in the preferences
(console/prefs.py) rebinds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Action:
    keys: str  # Textual key names, comma separated ("plus,right_square_bracket")
    action: str  # app action name, without the "action_" prefix
    title: str  # short text for the footer and the palette
    help: str  # one line for the help screen and the palette
    group: str  # section of the help screen
    show: bool = True  # shown in the footer
    display: str = ""  # how the keys are written for humans ("+ ]")
    owner: str = "screen"  # who runs the action: "screen", "log" (the log view), "app" or "fleet" (the fleet screen)
    needs_owner: bool = False  # only on a server this console owns (not when attached)
    id: str = ""  # the binding id a user keymap names, when not the action's name (the fleet's: "fleet.<action>")

    @property
    def binding_id(self) -> str:
        return self.id or self.action


def _fleet(keys: str, action: str, title: str, help: str, display: str, *, show: bool = True, name: str = "") -> Action:
    """A key of the fleet screen; its binding id is ``fleet.<name>`` (apart from the server
    screen's: both have a verify, an advice...)."""
    return Action(keys, action, title, help, "fleet", show=show, display=display, owner="fleet", id=f"fleet.{name or action}")


ACTIONS: tuple[Action, ...] = (
    # threshold and mode
    Action(
        "plus,right_square_bracket", "threshold_up", "N+1", "Raise the speculation threshold N by 1", "threshold", display="+ ]"
    ),
    Action(
        "minus,left_square_bracket", "threshold_down", "N-1", "Lower the speculation threshold N by 1", "threshold", display="- ["
    ),
    Action(
        "equals_sign",
        "threshold_prompt",
        "Set N",
        "Set an exact threshold N (validated, read back on every rank)",
        "threshold",
        display="=",
    ),
    Action("F", "cycle_force", "Force", "Cycle the forced mode: auto -> speculative -> target-only", "threshold", display="F"),
    Action(
        "A",
        "apply_advice",
        "Advice",
        "The advisor: N from the server's cost curves; enter applies it (asks first; read back, journaled)",
        "threshold",
        show=False,
    ),
    Action(
        "H",
        "apply_suggestion",
        "Apply hint",
        "Against flapping: apply the suggested hysteresis (else dwell), read back like N",
        "threshold",
        show=False,
    ),
    # server
    Action("s", "start_server", "Start", "Launch the server of this profile", "server", needs_owner=True),
    Action("x", "stop_server", "Stop", "Stop the server (asks first)", "server", needs_owner=True),
    Action("r", "restart_server", "Restart", "Restart the server (asks first)", "server", needs_owner=True),
    Action("v", "verify", "Verify", "Re-run the three verification layers", "server"),
    # log view (keys as in less and k9s: they move; a key that filters says so)
    Action("f", "log_follow", "Follow", "Toggle following the end of the log", "log", owner="log"),
    Action("j", "scroll_down", "Down", "One line down (also the down arrow)", "log", show=False, owner="log"),
    Action("k", "scroll_up", "Up", "One line up (also the up arrow)", "log", show=False, owner="log"),
    Action("space", "page_down", "Page down", "One screen down (also pgdn)", "log", show=False, owner="log"),
    Action("b", "page_up", "Page up", "One screen up (also pgup)", "log", show=False, owner="log"),
    Action("ctrl+d", "half_page(1)", "Half down", "Half a screen down", "log", show=False, display="ctrl+d", owner="log"),
    Action("ctrl+u", "half_page(-1)", "Half up", "Half a screen up", "log", show=False, display="ctrl+u", owner="log"),
    Action("end,G", "log_end", "End", "Jump to the end of the log and follow", "log", show=False, display="G end", owner="log"),
    Action("home,g", "log_home", "Top", "Jump to the start of the log", "log", show=False, display="g home", owner="log"),
    Action(
        "slash",
        "log_search",
        "Search",
        "Search by regex, as in less: highlight matches, jump to the nearest (n/N: next/previous)",
        "log",
        display="/",
        owner="log",
    ),
    Action(
        "ampersand",
        "log_filter",
        "Filter",
        "Filter lines by regex, as less's & (a leading ! inverts; empty clears)",
        "log",
        display="&",
        owner="log",
    ),
    Action("n", "log_next", "Next", "Jump to the next search match", "log", show=False, owner="log"),
    Action("N", "log_prev", "Prev", "Jump to the previous search match", "log", show=False, owner="log"),
    Action(
        "escape",
        "log_clear",
        "Clear",
        "Clear the filter, the search and the quick filters",
        "log",
        show=False,
        display="esc",
        owner="log",
    ),
    Action(
        "a",
        "log_polls",
        "Polls",
        "Show or hide polling access lines (GET /health, /server_info, /v1/loads, /metrics ...)",
        "log",
        show=False,
        owner="log",
    ),
    Action("t", "log_fold", "Fold", "Fold or unfold one event logged by every TP rank (TP0-7)", "log", show=False, owner="log"),
    Action("e", "log_errors", "Errors", "Quick filter: errors and tracebacks only", "log", show=False, owner="log"),
    Action("d", "log_hide_stats", "Hide stats", "Quick filter: hide decode/prefill stats lines", "log", show=False, owner="log"),
    Action("R", "log_rank", "Rank", "Quick filter: one TP rank at a time (cycles; esc clears)", "log", show=False, owner="log"),
    Action("w", "log_wrap", "Wrap", "Toggle wrapping long lines", "log", show=False, owner="log"),
    Action(
        "number_sign",
        "log_numbers",
        "Numbers",
        "Show or hide the log file's line numbers",
        "log",
        show=False,
        display="#",
        owner="log",
    ),
    Action(
        "colon",
        "log_goto",
        "Go to line",
        'Go to a log line by its number (as verification cites it: "log line 118")',
        "log",
        show=False,
        display=":",
        owner="log",
    ),
    Action(
        "I",
        "log_init",
        "Init line",
        "Go to each rank's init line (Dynamic speculation disable enabled: threshold=N) in turn, or say none was logged",
        "log",
        show=False,
        owner="log",
    ),
    Action(
        "y",
        "log_yank",
        "Copy",
        "Copy the current line (the one gone to, else the current match), else the lines on the screen",
        "log",
        show=False,
        owner="log",
    ),
    Action(
        "ctrl+s",
        "log_save",
        "Save",
        "Save the lines shown (after filters) to a file (asks before overwriting)",
        "log",
        show=False,
        display="ctrl+s",
        owner="log",
    ),
    # chart (console/widgets/live_panel.py, over the profile's history)
    Action(
        "z",
        "chart_zoom_out",
        "Zoom out",
        "Chart: zoom out over the history (one bar a poll, 10 min, 1 h, 6 h)",
        "chart",
        show=False,
    ),
    Action("Z", "chart_zoom_in", "Zoom in", "Chart: zoom back in", "chart", show=False),
    Action("c", "chart_metric", "Chart", "Chart: show batch, tok/s or the accept length", "chart", show=False),
    # console
    Action(
        "p", "toggle_panels", "Panels", "Show or hide the secondary panels (timeline, GPUs, verification)", "console", show=False
    ),
    Action("tab", "focus_next", "Focus", "Move focus (log view, verification checklist)", "console", show=False, owner="app"),
    Action("question_mark", "help", "Help", "List every key", "console", display="?"),
    Action(
        "D",
        "details",
        "Details",
        "The top of the screen in full: status, reason, latency, advice, last change",
        "console",
        show=False,
    ),
    Action("ctrl+z", "suspend_process", "Suspend", "Suspend to the shell (fg resumes)", "console", show=False, owner="app"),
    Action("q", "quit_console", "Quit", "Quit (asks whether to leave the server running)", "console"),
    # the fleet screen (console/fleet/screen.py): keys act on the marked members, or on every member shown
    _fleet("enter", "open_member", "Open", "The single-server screen of the member (escape comes back)", "enter"),
    _fleet("space", "toggle_select", "Select", "Mark / unmark the member (keys act on the marked ones)", "space"),
    _fleet("equals_sign", "set_n", "Set N", "Set threshold N (asks; validated)", "="),
    _fleet("plus,right_square_bracket", "step_n(1)", "N+1", "N + 1 per member", "+ ]", name="step_n_up"),
    _fleet("minus,left_square_bracket", "step_n(-1)", "N-1", "N - 1 per member", "- [", name="step_n_down"),
    _fleet("F", "force", "Force", "Force a mode: (a)uto, (s)peculative, (t)arget-only", "F"),
    _fleet("A", "apply_advice", "Advice", "Set each member's own suggested N (asks)", "A"),
    _fleet("v", "verify", "Verify", "Run the three verification layers", "v"),
    _fleet("L", "launch", "Launch", "Launch (nothing marked, no filter: the gateway too)", "L"),
    _fleet("X", "stop", "Stop", "Stop (asks; nothing marked, no filter: the gateway too)", "X"),
    _fleet("o", "sort", "Sort", "Sort by the next column", "o"),
    _fleet("O", "sort_reverse", "Reverse", "Reverse the sort", "O", show=False),
    _fleet("slash", "filter", "Filter", "Filter rows (words; !word excludes)", "/"),
    _fleet("l", "gateway_log", "Gateway log", "The gateway's (smg's) own log, followed", "l", show=False),
    _fleet("escape", "clear", "Clear", "Clear the marks and the filter", "esc", show=False),
    _fleet("question_mark", "fleet_help", "Help", "This help", "?"),
    _fleet("q", "quit_fleet", "Quit", "Quit: leave the fleet running (supervised) or stop it (asks)", "q"),
)

PALETTE_EXCLUDE = {"focus_next", "suspend_process"}
SERVER_OWNERS = frozenset({"screen", "log", "app"})  # the server screen's actions; "fleet": the fleet screen's


def actions_of(owners: frozenset[str]) -> list[Action]:
    """The actions one screen binds, helps with and offers in its palette."""
    return [a for a in ACTIONS if a.owner in owners]


NEEDS_OWNER = frozenset(a.action for a in ACTIONS if a.needs_owner)
BINDING_IDS = frozenset(a.binding_id for a in ACTIONS)  # what a user keymap may rebind


def key_text(action: Action) -> str:
    return action.display or action.keys.replace(",", " ")


# Footer order: what matters most first, so a narrow terminal still shows it.
FOOTER_FIRST = ("threshold_up", "threshold_down", "threshold_prompt", "help", "quit_console")


FOOTER_ORDER = {
    a.binding_id: i
    for i, a in enumerate(
        sorted(ACTIONS, key=lambda a: FOOTER_FIRST.index(a.action) if a.action in FOOTER_FIRST else len(FOOTER_FIRST))
    )
}


def footer_rank(action: str) -> int:
    """Where an action's key stands in the footer (Textual's own keys after ours)."""
    return FOOTER_ORDER.get(action, len(FOOTER_ORDER))


def bindings_for(owner: str) -> list[BindingType]:
    """The key bindings of the node ``owner`` names ("screen", "log"), in footer order; the
    screen also binds the app's actions (as ``app.<action>``). Each binding's id is its
    action's name (a user keymap rebinds it)."""
    owners = {owner, "app"} if owner == "screen" else {owner}
    return [
        Binding(
            a.keys,
            f"app.{a.action}" if a.owner == "app" else a.action,
            a.title,
            show=a.show,
            key_display=a.display or None,
            tooltip=a.help,
            id=a.binding_id,
        )
        for a in sorted((a for a in ACTIONS if a.owner in owners), key=lambda a: footer_rank(a.binding_id))
    ]
