"""Small formatting helpers shared by the panels; all tolerate missing values (None)."""

from __future__ import annotations


def num(value: float | None, fmt: str = "{:.1f}", none: str = "-") -> str:
    return none if value is None else fmt.format(value)


def duration(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "-"
    s = int(seconds)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{s:02d}s" if m else f"{s}s"


def clock(ts: str | None) -> str:
    """'2026-11-29T10:00:03.5' -> '10:00:03'; anything else as given (or '-')."""
    if not ts:
        return "-"
    text = str(ts)
    if "T" in text:
        text = text.split("T", 1)[1]
    elif " " in text:
        text = text.split(" ", 1)[1]
    return text[:8]


def mode_badge(mode: str | None, idle: bool = False) -> tuple[str, str]:
    """The mode as a badge; ``idle`` (nothing decoding) adds ``· idle``: the mode is then
    where the last decode step left it, and no step decides anything until work comes."""
    tail = " \u00b7 idle " if idle else " "
    if mode == "speculative":
        return " SPECULATIVE" + tail, "bold black on bright_green"
    if mode == "target_only":
        return " TARGET-ONLY" + tail, "bold white on blue"
    return " MODE ? ", "bold black on grey50"


STATUS_MARKS = {"pass": ("\u2713", "bold green"), "fail": ("\u2717", "bold red"), "pending": ("\u2026", "yellow")}


def mark(status: str) -> tuple[str, str]:
    return STATUS_MARKS.get(status, ("?", "dim"))
