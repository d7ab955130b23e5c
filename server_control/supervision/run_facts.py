"""The facts of a supervised run that ``Supervisor.update`` sets beside its state, each by
name and type (``RunFacts``: a fact left out stays as it is; None is a value, e.g. "no
error now"), and the signature every part of the supervisor sees it by (``RunUpdater``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypedDict, Unpack

if TYPE_CHECKING:
    from server_control.model.vocabulary import RunState
    from server_control.state.runs import RunRecord


class RunFacts(TypedDict, total=False):
    record: RunRecord | None
    restarts: int
    exit_code: int | None
    fatal_reason: str | None
    fatal_tail: list[str]
    last_error: str | None
    health_error: str | None
    backoff_history: list[float]
    next_restart_at: float | None
    runtime_note: str | None
    last_exit: str | None


class RunUpdater(Protocol):
    def update(self, state: RunState | None = None, **facts: Unpack[RunFacts]) -> None: ...
