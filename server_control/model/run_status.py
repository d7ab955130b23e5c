"""The run part of the session snapshot (server_control/model/snapshot.py): the server's
process, its supervision and who supervises it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from server_control.model.json_read import as_bool, as_int, as_list, as_num, as_obj, as_str
from server_control.model.vocabulary import ServerState, server_state

_EMPTY_SETTINGS: Mapping[str, int | str] = MappingProxyType({})


@dataclass(frozen=True)
class SupervisorInfo:
    """The process that restarts the run's crashes (server_control/supervision/ownership.py)."""

    pid: int
    kind: str  # console | supervise | handoff
    since: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "kind": self.kind, "since": self.since}

    @classmethod
    def from_json(cls, raw: object) -> SupervisorInfo | None:
        r = as_obj(raw)
        pid, kind = as_int(r.get("pid")), as_str(r.get("kind"))
        return cls(pid, kind, as_str(r.get("since"))) if pid is not None and kind is not None else None


@dataclass(frozen=True)
class RunStatus:
    """The server's run. The supervision facts (``supervising``, ``last_error``,
    ``next_restart_in_s``) exist only where a supervisor does (a profile's run), so an
    attached server's JSON has none of their keys."""

    state: ServerState | None = None  # a RunState, or Attached.EXTERNAL
    pid: int | None = None
    pgid: int | None = None
    started_at: str | None = None
    uptime_s: float | None = None
    port: int | None = None
    restarts: int = 0
    log_path: str | None = None
    exit_code: int | None = None
    fatal_reason: str | None = None
    processes: tuple[int, ...] = ()
    supervising: bool | None = None  # None: no supervisor (attached)
    last_error: str | None = None
    next_restart_in_s: float | None = None
    runtime: Mapping[str, int | str] = field(default_factory=lambda: _EMPTY_SETTINGS)  # settings changed
    runtime_note: str | None = None  # at runtime, kept across restarts (server_control/supervision/carried_settings.py)
    supervisor: SupervisorInfo | None = None  # who restarts crashes (None: nobody)
    last_exit: str | None = None  # how the server last ended on its own (crash, watchdog): kept across restarts
    lost_supervisor: SupervisorInfo | None = None  # named by the record, gone without detaching (nobody supervises)
    took_over_from: SupervisorInfo | None = None  # such a one, when this process took supervision over from it
    supervisor_note: str | None = None  # a console found the run without a supervisor and started one: said so

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "state": self.state,
            "pid": self.pid,
            "pgid": self.pgid,
            "started_at": self.started_at,
            "uptime_s": self.uptime_s,
            "port": self.port,
            "restarts": self.restarts,
            "log_path": self.log_path,
            "exit_code": self.exit_code,
            "fatal_reason": self.fatal_reason,
            "processes": list(self.processes),
        }
        if self.supervising is not None:
            out.update(
                supervising=self.supervising,
                last_error=self.last_error,
                next_restart_in_s=self.next_restart_in_s,
                runtime=dict(self.runtime),
                runtime_note=self.runtime_note,
                supervisor=self.supervisor.to_json() if self.supervisor else None,
                last_exit=self.last_exit,
                lost_supervisor=self.lost_supervisor.to_json() if self.lost_supervisor else None,
                took_over_from=self.took_over_from.to_json() if self.took_over_from else None,
                supervisor_note=self.supervisor_note,
            )
        return out

    @classmethod
    def from_json(cls, raw: object) -> RunStatus:
        r = as_obj(raw)
        return cls(
            state=server_state(r.get("state")),
            pid=as_int(r.get("pid")),
            pgid=as_int(r.get("pgid")),
            started_at=as_str(r.get("started_at")),
            uptime_s=as_num(r.get("uptime_s")),
            port=as_int(r.get("port")),
            restarts=as_int(r.get("restarts")) or 0,
            log_path=as_str(r.get("log_path")),
            exit_code=as_int(r.get("exit_code")),
            fatal_reason=as_str(r.get("fatal_reason")),
            processes=tuple(p for p in map(as_int, as_list(r.get("processes"))) if p is not None),
            supervising=as_bool(r.get("supervising")),
            last_error=as_str(r.get("last_error")),
            next_restart_in_s=as_num(r.get("next_restart_in_s")),
            runtime=MappingProxyType(
                {k: v for k, v in as_obj(r.get("runtime")).items() if isinstance(v, (int, str)) and not isinstance(v, bool)}
            ),
            runtime_note=as_str(r.get("runtime_note")),
            supervisor=SupervisorInfo.from_json(r.get("supervisor")),
            last_exit=as_str(r.get("last_exit")),
            lost_supervisor=SupervisorInfo.from_json(r.get("lost_supervisor")),
            took_over_from=SupervisorInfo.from_json(r.get("took_over_from")),
            supervisor_note=as_str(r.get("supervisor_note")),
        )
