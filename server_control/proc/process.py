"""Start a server detached from the console, find every process of a run, stop them all.

* ``launch(spec)``: a keeper (server_control/proc/keeper.py) starts the server in a new session
  with stdout+stderr into the run's own new log file (the console is never in the pipe),
  stdin from /dev/null, and records its exit status in ``spec.exit_file``.
* ``run_processes(ident)`` (server_control/host/identity.py): the verified leader (pid + start
  time + command line) with its group, session and descendants, plus recorded members.
  Nothing else, ever: a group whose leader is gone is not taken for the run.
* ``stop_run(ident, ...)``: SIGTERM (+ SIGCONT) to the run's processes, a grace period,
  SIGKILL, then confirm nothing of the run remains and name what does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from server_control.config.profile import LaunchSpec
from server_control.host import identity
from server_control.host.identity import RunIdentity
from server_control.host.start_ticks import ProcStart, recorded
from server_control.sanitize import strip_controls
from server_control.state import run_logs

POLL_S = 0.1
KILL_CONFIRM_S = 10.0
KEEPER_TIMEOUT_S = 30.0
EXIT_FILE_WAIT_S = 2.0
KEEPER_NOTE_MAX_S = 20.0  # how long a keeper that still runs may take to write the exit code


@dataclass(frozen=True)
class Launched:
    pid: int
    create_time: float
    pgid: int
    sid: int
    log_path: Path
    argv: tuple[str, ...] = ()
    start: ProcStart | None = None  # None only where /proc could not be read
    record: dict[str, Any] | None = None  # the run record the keeper wrote (launch(..., record=))
    keeper_pid: int | None = None

    def identity(self) -> RunIdentity:
        return RunIdentity(self.pid, self.create_time, self.argv, start=self.start)


@dataclass
class ProcInfo:
    pid: int
    cmdline: str

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "cmdline": self.cmdline}


@dataclass
class StopResult:
    ok: bool  # nothing of the run remains
    was_running: bool  # something was there to stop
    signalled: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # needed SIGKILL
    remaining: list[ProcInfo] = field(default_factory=list)
    exit_code: int | None = None  # the leader's, from its keeper
    elapsed_s: float = 0.0
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "was_running": self.was_running,
            "signalled": self.signalled,
            "killed": self.killed,
            "remaining": [p.to_dict() for p in self.remaining],
            "exit_code": self.exit_code,
            "elapsed_s": round(self.elapsed_s, 3),
            "message": self.message,
        }


def _keeper_env() -> dict[str, str]:
    """The keeper's own environment: enough to import server_control, no key."""
    pkg_root = str(Path(__file__).resolve().parents[2])  # the directory holding server_control
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    env["PYTHONPATH"] = pkg_root
    return env


def launch(
    spec: LaunchSpec,
    record: dict[str, Any] | None = None,
    record_path: str | Path | None = None,
    manifest: str | Path | None = None,
) -> Launched:
    """Start the server through a keeper (server_control/keeper.py) in a new session: it is
    the leader of its own group; stdout+stderr go to a new log file of its own. With
    ``record`` (a run record template) the keeper writes it to ``record_path``, identity
    filled in, before it answers (and ends the server if it cannot). The new log is listed in
    ``manifest`` before the server starts (so it is pruned later whoever dies when)."""
    if any("\0" in a for a in spec.argv) or any("\0" in k or "\0" in v for k, v in spec.env.items()):
        raise RuntimeError("a NUL character in the server's command line or environment: refused")
    log_path, log_fd = run_logs.open_new_log(Path(spec.log_path), spec.log_mode)
    if manifest is not None:
        try:
            run_logs.remember(manifest, log_path)
        except OSError:
            pass  # a full disk: the log is kept (never pruned) rather than the launch failing
    request = {
        "argv": list(spec.argv),
        "env": dict(spec.env),
        "cwd": str(spec.cwd),
        "log_fd": log_fd,
        "log_path": str(log_path),
        "log_mode": spec.log_mode,
        "max_bytes": spec.log_max_bytes,
        "keep_rotated": spec.log_keep_rotated,
        "exit_file": str(spec.exit_file or log_path.with_name(log_path.name + ".exit")),
    }
    if record is not None and record_path is not None:
        request.update(record=dict(record, log_path=str(log_path)), record_path=str(record_path))
    try:
        keeper = subprocess.Popen(
            [sys.executable, "-m", "server_control.keeper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_fd,
            pass_fds=(log_fd,),
            start_new_session=True,
            env=_keeper_env(),
            cwd="/",
        )
        out, _ = keeper.communicate(json.dumps(request).encode(), timeout=KEEPER_TIMEOUT_S)
    finally:
        os.close(log_fd)
    try:
        answer = json.loads(out.decode("utf-8", "replace").strip() or "{}")
    except ValueError:
        answer = {}
    if "pid" not in answer:
        raise OSError(answer.get("error") or f"the keeper did not start the server (see {log_path})")
    pid = int(answer["pid"])
    return Launched(
        pid=pid,
        create_time=float(answer["create_time"]),
        pgid=pid,
        sid=pid,
        log_path=log_path,
        argv=tuple(spec.argv),
        start=recorded(answer.get("boot_id"), answer.get("start_ticks")),
        record=answer.get("record") if isinstance(answer.get("record"), dict) else None,
        keeper_pid=answer.get("keeper_pid") if isinstance(answer.get("keeper_pid"), int) else None,
    )


def exit_status(
    exit_file: str | Path | None,
    pid: int,
    create_time: float,
    wait_s: float = EXIT_FILE_WAIT_S,
    keeper_runs: Callable[[], bool] | None = None,
) -> int | None:
    """The run's exit code as its keeper recorded it (None: not known, e.g. keeper killed).
    Waits ``wait_s`` for the keeper's note, and up to ``KEEPER_NOTE_MAX_S`` while
    ``keeper_runs()`` says the keeper still runs (it writes the note after it reaped the
    server: on a loaded machine that took more than 2 s, and the exit code was "unknown")."""
    if exit_file is None:
        return None
    start = time.monotonic()
    while True:
        try:
            data = json.loads(Path(exit_file).read_text(encoding="utf-8"))
            if (
                data.get("pid") == pid
                and abs(float(data.get("create_time", 0)) - create_time) <= 1.0
                and data.get("returncode", 0) is not None
            ):  # null: the keeper's start note
                rc = data.get("returncode")
                return rc if isinstance(rc, int) and not isinstance(rc, bool) else None
        except (OSError, ValueError, AttributeError):
            pass
        waited = time.monotonic() - start
        if waited >= wait_s and (keeper_runs is None or waited >= KEEPER_NOTE_MAX_S or not keeper_runs()):
            return None
        time.sleep(0.02)


def _cmdline(p: psutil.Process) -> str:
    """A process's command line as shown to the operator (a process sets its own title)."""
    try:
        return strip_controls(" ".join(p.cmdline()) or p.name())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return "?"


def describe(procs: list[psutil.Process]) -> list[ProcInfo]:
    return [ProcInfo(p.pid, _cmdline(p)) for p in procs]


def _signal(ident: RunIdentity, procs: list[psutil.Process], sig: int) -> list[int]:
    """Signal the verified leader's group and each known process of the run (psutil checks
    that a pid still names the same process before it signals)."""
    sent = []
    leader = identity.verified_leader(ident)
    pgid = None
    if leader is not None:
        try:
            pgid = os.getpgid(leader.pid)
        except OSError:
            pgid = None
    for p in procs:
        try:
            p.send_signal(sig)
            if sig == signal.SIGTERM:
                p.send_signal(signal.SIGCONT)  # a stopped process must run to act on SIGTERM
            sent.append(p.pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    if pgid is not None:  # members that appeared since the list was made
        for s in (sig, signal.SIGCONT) if sig == signal.SIGTERM else (sig,):
            try:
                os.killpg(pgid, s)
            except (ProcessLookupError, PermissionError):
                pass
    return sent


async def _wait_gone(ident: RunIdentity, known: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    while True:
        left = {p.pid: p for p in known if identity.alive(p)}
        for p in identity.run_processes(ident):
            left.setdefault(p.pid, p)
        if not left or time.monotonic() >= deadline:
            return sorted(left.values(), key=lambda p: p.pid)
        await asyncio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


async def stop_run(ident: RunIdentity, grace_s: float, exit_file: str | Path | None = None) -> StopResult:
    """SIGTERM the run, wait up to ``grace_s``, SIGKILL what is left, confirm none remains.
    Only the run's own processes (``identity.run_processes``) are ever signalled."""
    t0 = time.monotonic()
    procs = identity.run_processes(ident)
    res = StopResult(ok=False, was_running=bool(procs))
    if procs:
        res.signalled = _signal(ident, procs, signal.SIGTERM)
        left = await _wait_gone(ident, procs, t0 + grace_s)
        if left:
            res.killed = _signal(ident, left, signal.SIGKILL)
            left = await _wait_gone(ident, left, time.monotonic() + KILL_CONFIRM_S)
        res.remaining = describe(left)
        if any(p.pid == ident.pid for p in procs):
            res.exit_code = await asyncio.to_thread(exit_status, exit_file, ident.pid, ident.create_time)
    res.ok = not res.remaining
    res.elapsed_s = time.monotonic() - t0
    if not res.was_running:
        res.message = "not running"
    elif res.ok:
        how = f"SIGKILL after {grace_s:g} s grace" if res.killed else "SIGTERM"
        res.message = f"stopped {len(res.signalled)} process(es) by {how}"
    else:
        names = "; ".join(f"pid {p.pid}: {p.cmdline}" for p in res.remaining)
        res.message = f"{len(res.remaining)} process(es) of the run remain after SIGKILL: {names}"
    return res
