"""A remote member's run, for ``server_control.session.session.Session``: the headless CLI on the
member's host, over SSH (server_control/fleet/ssh.py).

What a session needs of a run, and where it comes from here:
- the run state (pid, restarts, log path, ...): ``specconsole status --profile P --json``
  on the host, every ``status_interval_s`` and after each action;
- the HTTP surface: an ``ssh -N -L`` tunnel from a local port to the server's address as
  the host sees it (the URL of that status), so the session polls and steers the server
  with the same code as a local one, and nothing listens beyond sshd;
- the log: ``specconsole logs --follow --lines all <remote log>`` streamed into a local mirror file, which
  the session follows like any log (same parser, same store, same screen; the copy
  survives the link dropping). A restart on the host (a new log path) starts a new mirror;
- launch / stop / restart: ``specconsole launch --wait|stop|restart --json`` on the host.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from server_control.advice.store import CurvesHome
from server_control.fleet.spec import MemberSpec
from server_control.fleet.ssh import SshHost, SshResult
from server_control.model.gpu_status import GpuStatus
from server_control.model.operation import OperationResult
from server_control.model.run_status import RunStatus
from server_control.model.snapshot import SessionSnapshot
from server_control.model.vocabulary import OtherState, Outcome, RunState
from server_control.sanitize import strip_controls
from server_control.telemetry.sample import Sample

log = logging.getLogger(__name__)
STATUS_TIMEOUT_S = 60.0
TUNNEL_UP_S = 15.0
KEEP_MIRRORS = 5
_MIRROR_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")  # a run log's own name (<stamp>-<n>.log)
# remote `launch` exit codes (docs/operations.md): 3 = a live run already holds the profile
LAUNCH_CONFLICT = 3


class RemoteRun:
    def __init__(
        self,
        member: MemberSpec,
        local_port: int,
        mirror_dir: Path,
        *,
        status_interval_s: float = 10.0,
        launch_wait_s: float = 120.0,
        curves_home: CurvesHome | None = None,
    ) -> None:
        self.member = member
        self._curves_home = curves_home
        self.ssh = SshHost(member)
        self.local_port = local_port
        self.mirror_dir = Path(mirror_dir)
        self.status_interval_s = status_interval_s
        self.launch_wait_s = launch_wait_s
        self.remote: SessionSnapshot | None = None  # the last `status --json` answer
        self.error: str | None = "not asked yet"
        self.statuses = 0  # answers received
        self._on_change: Callable[[], None] = lambda: None
        self._reachable = False
        self._task: asyncio.Task[Any] | None = None
        self._tunnel: asyncio.subprocess.Process | None = None
        self._tunnel_target: tuple[str, int] | None = None
        self._stream: asyncio.subprocess.Process | None = None
        self._remote_log: str | None = None
        self._mirror: Path | None = None
        self._refresh_lock = asyncio.Lock()

    # -- what Session calls -----------------------------------------------------------------
    async def start(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        await self.refresh()
        self._task = asyncio.create_task(self._loop(), name=f"remote-{self.member.name}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:  # noqa: BLE001 - closing anyway
                pass
            self._task = None
        await self.ssh.close()
        self._tunnel = self._stream = None

    def log_path(self) -> Path | None:
        return self._mirror

    def pids(self) -> list[int]:
        return []  # its processes are on another host

    def on_sample(self, sample: Sample) -> None:
        self._reachable = sample.reachable

    def owns_server(self) -> bool | None:
        return None  # its processes are on another host: the host's own status says

    def history_dir(self) -> Path | None:
        return None  # the history is kept where the server runs, by the console there

    def curves_home(self, url: str) -> CurvesHome | None:
        return self._curves_home  # the fleet's, under the member's name: ``url`` is a tunnel's port

    def status(self) -> RunStatus:
        run = self.remote.run if self.remote is not None else RunStatus()
        st = replace(
            run,
            state=run.state or OtherState.UNKNOWN,
            log_path=str(self._mirror) if self._mirror else None,
            supervising=bool(run.supervising),
        )
        if self.remote is None or self.error:
            st = replace(st, last_error=self.error)
        if st.state == RunState.STARTING and self._reachable:
            st = replace(st, state=RunState.READY)  # the host's status is older than our last poll
        return st

    def gpus(self) -> GpuStatus:
        """The host's GPUs as its own console sees them (NVML there)."""
        return self.remote.gpus if self.remote is not None else GpuStatus(False, self.error or "no status yet")

    async def launch(self) -> OperationResult:
        res = await self.ssh.run(
            "launch",
            "--profile",
            self.member.profile_ref,
            "--wait",
            str(self.launch_wait_s),
            "--json",
            timeout_s=self.launch_wait_s + 30,
        )
        out = self._result("launch", res, conflict_ok=True)
        await self.refresh()
        return out

    async def stop(self) -> OperationResult:
        res = await self.ssh.run("stop", "--profile", self.member.profile_ref, "--json", timeout_s=120)
        out = self._result("stop", res)
        await self.refresh()
        return out

    async def restart(self) -> OperationResult:
        res = await self.ssh.run(
            "restart",
            "--profile",
            self.member.profile_ref,
            "--wait",
            str(self.launch_wait_s),
            "--json",
            timeout_s=self.launch_wait_s + 150,
        )
        out = self._result("restart", res)
        await self.refresh()
        return out

    async def remember_runtime(self, key: str, value: object) -> str | None:
        return None  # the host's own run record keeps it (the host's console applied it)

    # -- the host's status --------------------------------------------------------------------
    def _result(self, operation: str, res: SshResult, conflict_ok: bool = False) -> OperationResult:
        body = res.json() or {}
        host = self.member.host
        if res.no_answer:
            return OperationResult(operation, Outcome.FAILED, f"{host}: {res.why()}", no_answer=True)
        if res.rc == 0 and res.json() is None and res.stdout.strip():  # garbage instead of the --json answer
            return OperationResult(operation, Outcome.FAILED, f"{host}: no JSON answer (exit 0)", no_answer=True)
        if res.rc == 0:
            return OperationResult(operation, Outcome.DONE, str(body.get("message") or f"done on {host}"))
        if conflict_ok and res.rc == LAUNCH_CONFLICT:
            return OperationResult(operation, Outcome.DONE, f"already running on {host}: {res.why()}")
        return OperationResult(operation, Outcome.FAILED, str(body.get("error") or body.get("message") or res.why()))

    async def refresh(self) -> None:
        """Ask the host for its status; keep the tunnel and the log stream on target."""
        async with self._refresh_lock:
            res = await self.ssh.run("status", "--profile", self.member.profile_ref, "--json", timeout_s=STATUS_TIMEOUT_S)
            body = res.json()
            if res.no_answer or body is None or "run" not in body:
                self.error = f"{self.member.host}: " + (
                    res.why() if res.no_answer else f"no JSON answer (exit {res.rc})" if body is None else "status printed no run"
                )
            else:
                self.remote, self.error = SessionSnapshot.from_json(body), None
                self.statuses += 1
                await self._ensure_tunnel(self.remote.url)
                self.error = await self._ensure_log(self.remote.run.log_path)
        self._on_change()

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.status_interval_s)
            try:
                await self.refresh()
            except Exception:  # noqa: BLE001 - the next round tries again
                log.exception("remote status of %s failed", self.member.name)

    async def _ensure_tunnel(self, url: str | None) -> None:
        if not url:
            return
        parts = urlsplit(url)
        target = (parts.hostname or "127.0.0.1", parts.port or 80)
        alive = self._tunnel is not None and self._tunnel.returncode is None
        if alive and target == self._tunnel_target:
            return
        if self._tunnel is not None:
            await self.ssh.stop_stream(self._tunnel)
        self._tunnel_target = target
        self._tunnel = await self.ssh.tunnel(self.local_port, *target)
        await self._tunnel_up()

    async def _tunnel_up(self, timeout_s: float = TUNNEL_UP_S) -> bool:
        """Wait until the tunnel's local port accepts (so the first poll is not a refusal)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while loop.time() < deadline and self._tunnel is not None and self._tunnel.returncode is None:
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.local_port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            return True
        return False

    async def _ensure_log(self, remote_log: str | None) -> str | None:
        """Stream the host's log into its mirror; what is wrong with it (None: fine). The
        host's answer names the file: a name that is not a plain file name ("/tmp/..")
        is refused, never joined onto the mirror directory."""
        alive = self._stream is not None and self._stream.returncode is None
        if not remote_log or (alive and remote_log == self._remote_log):
            return None
        name = Path(remote_log).name
        if name in ("", ".", "..") or not _MIRROR_NAME.fullmatch(name):
            return f"{self.member.host}: bad log path {strip_controls(remote_log)[:200]!r} in its status"
        if self._stream is not None:
            await self.ssh.stop_stream(self._stream)
        self._remote_log = remote_log
        mirror = self.mirror_dir / name
        mirror.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.close(os.open(mirror, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600))  # sent from its start again
        self._stream = await self.ssh.stream(["logs", "--follow", "--lines", "all", remote_log], mirror)
        self._mirror = mirror
        from server_control.state.run_logs import prune_dir

        for gone in prune_dir(self.mirror_dir, KEEP_MIRRORS, protect=(mirror,)):
            for part in gone.parent.glob(f"{gone.name}.[0-9]*"):  # its rotated parts
                part.unlink(missing_ok=True)
        return None
