"""The fleet table's columns, cells, sorting and filtering: pure functions over ``MemberRow``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from rich.text import Text

from console.widgets.fmt import mark
from server_control.fleet.member import MemberRow
from server_control.model.vocabulary import EXTERNAL_STATE, MemberOutcome, RunState

# A member whose numbers are live: answering, or attached (no supervisor state of ours).
SERVING_STATES = frozenset({RunState.READY, RunState.UNHEALTHY, EXTERNAL_STATE})

MODE_WORD = {"speculative": "SPEC", "target_only": "TARGET", None: "-"}
BAD_STATES = (RunState.CRASHED, RunState.FATAL, RunState.UNHEALTHY, MemberOutcome.NO_ANSWER)


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    sort_key: Callable[[MemberRow], Any]  # -> comparable


def _num(v, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


COLUMNS = (
    Column("sel", " ", 1, lambda r: 0),
    Column("name", "MEMBER", 12, lambda r: r.name),
    Column("host", "HOST", 16, lambda r: r.host),
    Column("state", "STATE", 9, lambda r: r.state),
    Column("mode", "MODE", 7, lambda r: r.mode or ""),
    Column("threshold", "N", 4, lambda r: -1 if r.threshold is None else r.threshold),
    Column("batch", "BATCH", 6, lambda r: -1 if r.batch is None else r.batch),
    Column("tok_s", "TOK/S", 7, lambda r: -1.0 if r.tok_s is None else r.tok_s),
    Column("accept_len", "ACC", 4, lambda r: -1.0 if r.accept_len is None else r.accept_len),
    Column("marks", "VERIFY", 7, lambda r: r.marks),
    Column("restarts", "RST", 4, lambda r: r.restarts),
    Column("gpu_util", "GPU%", 5, lambda r: -1.0 if r.gpu_util is None else r.gpu_util),
    Column("itl_p95", "ITL95", 6, lambda r: -1.0 if r.itl_p95 is None else r.itl_p95),  # 15 s, from /metrics
    Column("trend", "TOK/S TREND", 11, lambda r: 0),  # the last readings (console/fleet/aggregate.py)
)
SORTABLE = tuple(c.key for c in COLUMNS if c.key not in ("sel", "trend"))


GLYPHS = {"+": "pass", "x": "fail", ".": "pending"}  # the row's marks -> the single screen's glyphs


def verify_glyphs(marks: str) -> Text:
    """``+x.`` as the single-server screen writes it: ✓ ✗ … in its colours (one glyph set)."""
    t = Text()
    for ch in marks:
        glyph, style = mark(GLYPHS.get(ch, "?"))
        t.append(glyph, style)
    return t


def stale(row: MemberRow) -> bool:
    """Numbers that are not live: a member that does not answer, or is not serving."""
    return not row.reachable or row.state not in SERVING_STATES


def cells(row: MemberRow, selected: bool) -> dict[str, Text | str]:
    state = Text(row.state, style="bold red" if row.state in BAD_STATES else "green" if row.state == RunState.READY else "yellow")
    n = _num(row.threshold) + ("F" if row.force not in (None, "auto") else "")  # F: forced (* marks selection)
    dim = stale(row)

    def live(text: str) -> Text | str:
        return Text(text, style="dim") if dim and text != "-" else text

    return {
        "sel": "*" if selected else " ",
        "name": row.name,
        "host": row.host,
        "state": state,
        "mode": live(MODE_WORD.get(row.mode, row.mode or "-")),
        "threshold": n,
        "batch": live(_num(row.batch)),
        "tok_s": live(_num(row.tok_s, "{:.1f}")),
        "accept_len": live(_num(row.accept_len, "{:.2f}")),
        "marks": verify_glyphs(row.marks),
        "restarts": str(row.restarts),
        "gpu_util": live(_num(row.gpu_util)),
        "itl_p95": live(ms(row.itl_p95)),
    }


def ms(seconds: float | None) -> str:
    """A latency in a table cell: "23ms", "1.4s", "-"."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.1f}s"


def matches(row: MemberRow, text: str) -> bool:
    """Filter: every word of ``text`` (case-insensitive) in the member's name, host, state or
    mode; a word starting with '!' must NOT be there."""
    hay = " ".join(
        str(x) for x in (row.name, row.host, row.state, MODE_WORD.get(row.mode, ""), row.mode or "", row.verify)
    ).lower()
    for word in text.lower().split():
        if word.startswith("!"):
            if word[1:] and word[1:] in hay:
                return False
        elif word not in hay:
            return False
    return True


def arrange(rows: Iterable[MemberRow], sort: str = "name", reverse: bool = False, filter_text: str = "") -> list[MemberRow]:
    column = next(c for c in COLUMNS if c.key == sort)
    shown = [r for r in rows if matches(r, filter_text)]
    return sorted(shown, key=column.sort_key, reverse=reverse)
