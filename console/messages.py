"""Messages the console posts between its parts (session events reach the app as these)."""
from __future__ import annotations

from textual.message import Message


class SessionEvent(Message):
    """The session published a change; ``topic`` is "snapshot" or "logs"."""

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic


class LogViewChanged(Message):
    """The log view's follow/filter/search/counter state changed (its status line redraws)."""

    def __init__(self, status: dict) -> None:
        super().__init__()
        self.status = status

