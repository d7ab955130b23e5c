"""Small formatting helpers shared by the panels; all tolerate missing or odd values."""
from __future__ import annotations


def section(snap: dict | None, name: str) -> dict:
    value = (snap or {}).get(name) if isinstance(snap, dict) else None
    return value if isinstance(value, dict) else {}


def num(value, fmt: str = "{:.1f}", none: str = "-") -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return none
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return none


def duration(seconds) -> str:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
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


def clock(ts) -> str:
    """'2026-11-29T10:00:03.5' -> '10:00:03'; anything else as given (or '-')."""
    if not ts:
        return "-"
    text = str(ts)
    if "T" in text:
        text = text.split("T", 1)[1]
    elif " " in text:
        text = text.split(" ", 1)[1]
    return text[:8]


def mode_badge(mode, idle: bool = False) -> tuple[str, str]:
    """The mode as a badge; ``idle`` (nothing decoding) adds ``· idle``: the mode is then
    where the last decode step left it, and no step decides anything until work comes."""
    tail = " \u00b7 idle " if idle else " "
    if mode == "speculative":
        return " SPECULATIVE" + tail, "bold black on bright_green"
    if mode == "target_only":
        return " TARGET-ONLY" + tail, "bold white on blue"
    return " MODE ? ", "bold black on grey50"


def idle(snap: dict) -> bool:
    """The server answers and has nothing to decode: decode batch 0 and nothing queued."""
    live = section(snap, "live")
    return (section(snap, "server").get("reachable") is True and live.get("batch") == 0
            and not live.get("queue"))


STATUS_MARKS = {"pass": ("\u2713", "bold green"), "fail": ("\u2717", "bold red"),
                "pending": ("\u2026", "yellow")}


def mark(status) -> tuple[str, str]:
    return STATUS_MARKS.get(status, ("?", "dim"))
