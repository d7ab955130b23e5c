"""What the parts of ``Supervisor`` (server_control/supervision/supervisor.py) share: the profile they
read (``SupervisedProfile``: a server's ``Profile`` or the fleet's ``GatewayProfile``), and,
for the type checker only, the state ``Supervisor.__init__`` sets and the methods the parts
call on each other (``SupervisorParts``, the base of ``WatchLoop``, ``RuntimeSettings`` and
``SupervisorRole``)."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from server_control.state import runs

if TYPE_CHECKING:
    from server_control.config.profile import LaunchSpec
    from server_control.model.run_status import SupervisorInfo
    from server_control.model.vocabulary import RunState
    from server_control.proc.process import ProcInfo
    from server_control.state.private_files import FileLock
    from server_control.supervision.restart_policy import RestartPolicy


class SupervisedProfile(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def path(self) -> Path | None: ...

    @property
    def kind(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str: ...

    @property
    def health(self) -> dict[str, Any]: ...

    @property
    def restart(self) -> dict[str, Any]: ...

    @property
    def dynamic(self) -> dict[str, Any]: ...

    @property
    def stop_grace_s(self) -> float: ...

    def launch_spec(self, state_dir: str | Path | None = None, preview: list[str] | None = None) -> LaunchSpec: ...

    def check_port(self) -> None: ...

    def api_key(self, preview: list[str] | None = None) -> str | None: ...

    def admin_api_key(self, preview: list[str] | None = None) -> str | None: ...


class SupervisorParts:
    if TYPE_CHECKING:
        profile: SupervisedProfile
        state_dir: Path
        state: RunState
        restarts: int
        record: runs.RunRecord | None
        supervising: bool
        health_error: str | None
        backoff_history: list[float]
        policy: RestartPolicy
        _epoch: int
        _op_lock: asyncio.Lock
        _lock: FileLock | None
        _fails: int
        on_change: Callable[[Any], None] | None
        role: str
        runtime_note: str | None
        last_error: str | None
        _sup_cache: tuple[float, SupervisorInfo | None]

        @property
        def _dynamic(self) -> dict[str, Any]: ...

        @property
        def exit_file(self) -> Path: ...

        def _set(self, state: RunState | None = None, **attrs: Any) -> None: ...

        def journal(self, action: str, result: str, detail: str = "", **kw: Any) -> None: ...

        def _load_disk(self) -> runs.RunRecord | None: ...

        def _live(self, rec: runs.RunRecord) -> bool: ...

        def processes(self) -> list[ProcInfo]: ...

        def adopt(self) -> runs.RunRecord | None: ...

        def supervisor_info(self) -> dict[str, Any]: ...

        async def _start(self, previous_logs: list[str], runtime: dict[str, Any] | None = None) -> runs.RunRecord: ...

        async def reapply_runtime(self) -> None: ...

        async def _exit_status(self) -> tuple[bool, int | None]: ...

