"""Messages the console posts between its parts (a session's callbacks reach the app as
``SnapshotChanged`` and ``LogsAppended``)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


class SnapshotChanged(Message):
    """The session's snapshot changed (a poll, an NVML sample, a run or setting change).
    Carries nothing: the receiver reads the snapshot when it gets to it, so queued ones
    coalesce into one (``can_replace``, as toolong's ``PendingLines``)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotChanged)


class LogsAppended(Message):
    """New records are in the session's log store; queued ones coalesce into one."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LogsAppended)


@dataclass(frozen=True)
class LogViewStatus:
    """What the log view's status line says."""

    follow: bool
    new: int  # lines arrived while paused
    shown: int  # records shown (after filters; a folded event counts once)
    total: int  # records ever read
    dropped: int  # records that left memory (the store keeps the newest 100k)
    truncated: int  # records with a line longer than the display cap (shown cut; the file keeps it)
    filter: str
    search: str
    hits: int
    wrap: bool
    position: tuple[int, int] | None = None  # (n, of): the current search match
    polls_hidden: int = 0  # polling access lines kept back (`a` shows them)
    show_polls: bool = False
    folded: int = 0  # TP ranks' copies folded into one row (`t` unfolds)
    fold: bool = True


class LogViewChanged(Message):
    """The log view's follow/filter/search/counter state changed (its status line redraws)."""

    def __init__(self, status: LogViewStatus) -> None:
        super().__init__()
        self.status = status
