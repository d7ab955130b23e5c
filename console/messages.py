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
    shown: int      # rows shown (after filters)
    total: int
    dropped: int
    truncated: int
    filter: str
    search: str
    hits: int
    wrap: bool


class LogViewChanged(Message):
    """The log view's follow/filter/search/counter state changed (its status line redraws)."""

    def __init__(self, status: LogViewStatus) -> None:
        super().__init__()
        self.status = status
