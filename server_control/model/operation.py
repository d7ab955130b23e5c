"""What a session operation returns: launch, stop, restart, threshold, force, verify.

One type with one way to say how it went (``outcome``):
  done     it happened (a verification ran: its verdict is in ``verification``)
  refused  not attempted or turned down: invalid value, a server that does not own or
           support it, a live run in the way; nothing changed
  failed   attempted and did not work (the server died, a request failed, processes remain)
``message`` is one line for the operator; the typed details ride along.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server_control.model.run_status import RunStatus
from server_control.model.snapshot import SettingChange
from server_control.model.verification import Verification
from server_control.model.vocabulary import CHANGE_OUTCOME, Outcome


@dataclass(frozen=True)
class OperationResult:
    operation: str  # launch | stop | restart | threshold | force | verify
    outcome: Outcome
    message: str = ""
    run: RunStatus | None = None  # launch / restart / stop: the run afterwards
    change: SettingChange | None = None  # threshold / force
    verification: Verification | None = None  # verify
    no_answer: bool = False  # failed because the other side never answered (a fleet host)

    @property
    def done(self) -> bool:
        return self.outcome == Outcome.DONE

    @classmethod
    def of_change(cls, operation: str, change: SettingChange) -> OperationResult:
        return cls(operation, CHANGE_OUTCOME.get(change.state, Outcome.FAILED), change.detail or change.state, change=change)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"operation": self.operation, "outcome": self.outcome, "message": self.message}
        if self.run is not None:
            out["run"] = self.run.to_json()
        if self.change is not None:
            out["change"] = self.change.to_json()
        if self.verification is not None:
            out["verification"] = self.verification.to_json()
        if self.no_answer:
            out["no_answer"] = True
        return out
