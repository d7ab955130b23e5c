"""Messages the console posts between its parts (session events reach the app as these)."""
from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


class SessionEvent(Message):
    """The session published a change; ``topic`` is "snapshot" or "logs"."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


@dataclass(frozen=True)
class LogViewStatus:
    """What the log view's status line says."""

    follow: bool
    new: int        # lines arrived while paused
    shown: int      # records shown (after filters; a folded event counts once)
    total: int      # records ever read
    dropped: int    # records that left memory (the store keeps the newest 100k)
    truncated: int  # records with a line longer than the display cap (shown cut; the file keeps it)
    filter: str
    search: str
    hits: int
    wrap: bool
    position: tuple[int, int] | None = None   # (n, of): the current search match
    polls_hidden: int = 0                     # polling access lines kept back (`a` shows them)
    show_polls: bool = False
    folded: int = 0                           # TP ranks' copies folded into one row (`t` unfolds)
    fold: bool = True


class LogViewChanged(Message):
    """The log view's follow/filter/search/counter state changed (its status line redraws)."""

    def __init__(self, status: LogViewStatus) -> None:
        super().__init__()
        self.status = status
