"""How log records look in the log view: cleaning, display cap, styles, filters.

Pure functions over ``Record`` objects (server_control/logs/store.py); no widget state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text

from console.widgets.log.rank_fold import relabel
from server_control.logs import DISPLAY_CAP, Record
from server_control.logs import compile_pattern as operator_regex
from server_control.logs.record import CONSOLE, ERROR
from server_control.logs.store import rank_matches
from server_control.protocol.decision import NOT_ACTIVE_PREFIX
from server_control.sanitize import strip_controls

ERROR_KINDS = frozenset({"error", "traceback"})
STATS_KINDS = frozenset({"decode", "prefill"})

# Styles in the 16 ANSI colours (readable with TERM=xterm, and in 256 colours over SSH).
# Loudest first: the patch's NOT active line (white on red), errors (bold bright red),
# tracebacks (red), warnings (yellow). A mode switch is normal operation: cyan, not red.
# The console's own lines (where the server stopped answering, a new run) are in reverse
# video, which NO_COLOR keeps.
KIND_STYLES: dict[str, Style] = {
    "spec_init": Style(color="black", bgcolor="bright_green", bold=True),
    "spec_switch": Style(color="cyan", bold=True),
    "error": Style(color="bright_red", bold=True),
    "traceback": Style(color="red"),
    "warning": Style(color="yellow"),
    "ready": Style(color="green", bold=True),
    "decode": Style(dim=True),
    "prefill": Style(dim=True),
    "http": Style(dim=True),
    "console": Style(reverse=True, bold=True),
}
NOT_ACTIVE_STYLE = Style(color="bright_white", bgcolor="red", bold=True)


@dataclass(frozen=True)
class Marks:
    """How search matches and the current line are marked. In the 16 ANSI colours (a 256-colour
    grey such as grey23 turns into "bright black" on TERM=xterm: black text on dark grey);
    the current line's background only where the kind sets none (the init line keeps its black
    on green), and its text light on it. Under NO_COLOR (Textual drops every colour) the
    matches are underlined and the current match is in reverse video."""

    match: Style
    current_match: Style
    current_row: Style


COLOR_MARKS = Marks(
    Style(color="black", bgcolor="yellow", underline=True),
    Style(color="bright_white", bgcolor="magenta", bold=True, underline=True),
    Style(color="bright_white", bgcolor="blue"),
)
NO_COLOR_MARKS = Marks(Style(underline=True), Style(reverse=True, bold=True), Style(bold=True))
CUT_STYLE = Style(color="black", bgcolor="grey50", italic=True)


def clean(text: str) -> str:
    """Strip escape sequences and control characters (server_control.sanitize); expand tabs."""
    text = strip_controls(text)
    if "\t" in text:
        text = text.expandtabs()
    return text


def record_text(rec: Record) -> str:
    """The record as it was written: prefix and message (multi-line for tracebacks)."""
    return clean(rec.raw)


def record_lines(rec: Record) -> list[str]:
    """Display lines of one record, each capped at DISPLAY_CAP with a visible marker."""
    out = []
    for line in record_text(rec).split("\n"):
        if len(line) > DISPLAY_CAP:
            line = f"{line[:DISPLAY_CAP]} \u2026[{len(line) - DISPLAY_CAP} more chars cut for display]"
        out.append(line)
    return out


def style_for(rec: Record) -> Style | None:
    """The line's style by kind; the patch's ``NOT active`` line (an error: the seed's whole
    failure) is the loudest line on the screen, white on red."""
    if rec.kind == ERROR and NOT_ACTIVE_PREFIX in rec.raw:
        return NOT_ACTIVE_STYLE
    return KIND_STYLES.get(rec.kind)


def render_row(
    rec: Record,
    sub: int,
    start: int,
    end: int,
    *,
    current: bool = False,
    pattern: re.Pattern | None = None,
    base: Style | None = None,
    label: str | None = None,
    marks: Marks = COLOR_MARKS,
) -> Text:
    """One row of the view: line ``sub`` of ``rec`` from ``start`` to ``end``, styled by kind,
    search matches highlighted; ``label`` ('TP0-7') replaces the rank tag of a folded record."""
    lines = record_lines(rec)
    full = lines[sub] if sub < len(lines) else ""
    if label is not None and rec.rank:
        whole = end == len(full)
        full = relabel(full, rec.rank, label)
        end = len(full) if whole else end
    text = Text(full[start:end], no_wrap=True, end="")
    if base is not None:
        text.stylize(base)
    style = style_for(rec)
    if style is not None:
        text.stylize(style)
    if current and (style is None or style.bgcolor is None):
        text.stylize(marks.current_row)
    if pattern is not None:
        hit = marks.current_match if current else marks.match
        for m in pattern.finditer(full):
            a, b = max(m.start(), start) - start, min(m.end(), end) - start
            if b > a:
                text.stylize(hit, a, b)
    return text


def compile_pattern(text: str) -> re.Pattern:
    """The operator's regex rule (server_control.logs.pattern: smart case); a bad one
    raises ValueError saying so, for the prompt to show."""
    try:
        return operator_regex(text)
    except ValueError as exc:
        raise ValueError(f"bad regex: {exc}") from None


@dataclass
class LineFilter:
    """What the log view shows: a regex (optionally inverted) plus quick filters."""

    text: str = ""  # the regex, without the leading ! of an inverted one
    pattern: re.Pattern | None = None
    invert: bool = False
    errors_only: bool = False
    hide_stats: bool = False
    rank: str | None = None

    @classmethod
    def parse(cls, text: str, base: LineFilter | None = None) -> LineFilter:
        """`/` input: regex, a leading `!` inverts, empty clears. Raises ValueError."""
        base = base or cls()
        text = text.strip()
        invert = text.startswith("!")
        body = text[1:] if invert else text
        pattern = compile_pattern(body) if body else None
        return cls(body, pattern, invert and bool(body), base.errors_only, base.hide_stats, base.rank)

    @property
    def prompt_text(self) -> str:
        """What `/` shows to edit: the filter as it was typed (`!GET` stays `!GET`)."""
        return ("!" if self.invert else "") + self.text if self.pattern is not None else ""

    @property
    def active(self) -> bool:
        return bool(self.pattern or self.errors_only or self.hide_stats or self.rank)

    def accepts(self, rec: Record) -> bool:
        kind = rec.kind
        if kind == CONSOLE:  # the console's own lines are context: no quick filter hides them
            return self.pattern is None or (self.pattern.search(rec.raw) is not None) != self.invert
        if self.errors_only and kind not in ERROR_KINDS:
            return False
        if self.hide_stats and kind in STATS_KINDS:
            return False
        if self.rank is not None and not rank_matches(self.rank, rec.rank):
            return False
        if self.pattern is not None:
            found = self.pattern.search(record_text(rec)) is not None
            return found != self.invert
        return True

    def describe(self) -> str:
        parts = []
        if self.pattern is not None:
            parts.append(("NOT " if self.invert else "") + f"/{self.text}/")
        if self.errors_only:
            parts.append("errors")
        if self.hide_stats:
            parts.append("no stats")
        if self.rank:
            parts.append(f"rank {self.rank}")
        return ", ".join(parts)
