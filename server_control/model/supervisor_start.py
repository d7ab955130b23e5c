"""What starting a run's own detached supervisor came to (console/run_supervisor.py starts
it; the session's ``ProfileRun`` asks through ``RunSupervisorPort``)."""

from __future__ import annotations

from dataclasses import dataclass

from server_control.model.vocabulary import Outcome


@dataclass(frozen=True)
class SupervisorStart:
    outcome: Outcome  # done: it runs (a launch: the run is launched); refused / failed: it said why and ended
    detail: str  # one line for the operator
    pid: int | None = None  # the supervisor's
    log_path: str | None = None  # where it writes what it does
