"""Start a server detached from the console, find every process of a run, stop them all.

* ``launch(spec)``: ``Popen(start_new_session=True)`` with stdout+stderr going straight into
  the run's own log file (the console is never in the pipe), stdin from /dev/null. The log
  file is opened exclusively (a new file per start) and closed in the parent at once.
* ``run_processes(...)``: a run's processes are those in its process group, OR in its
  session, OR descendants of its leader (SGLang's children can be re-parented or move to
  another group), started no earlier than the leader. Zombies count as gone.
* ``stop_run(...)``: SIGTERM to the group (and any stray member), a grace period, SIGKILL,
  then confirm nothing of the run remains and name what does.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from server_control.profile import LaunchSpec

POLL_S = 0.1
KILL_CONFIRM_S = 10.0


@dataclass
class Launched:
    popen: subprocess.Popen
    pid: int
    create_time: float
    pgid: int
    sid: int
    log_path: Path


@dataclass
class ProcInfo:
    pid: int
    cmdline: str

    def to_dict(self) -> dict:
        return {"pid": self.pid, "cmdline": self.cmdline}


@dataclass
class StopResult:
    ok: bool                                   # nothing of the run remains
    was_running: bool                          # something was there to stop
    signalled: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)        # needed SIGKILL
    remaining: list[ProcInfo] = field(default_factory=list)
    exit_code: int | None = None               # leader's, when we are its parent
    elapsed_s: float = 0.0
    message: str = ""

    def to_dict(self) -> dict:
        return {"ok": self.ok, "was_running": self.was_running, "signalled": self.signalled,
                "killed": self.killed, "remaining": [p.to_dict() for p in self.remaining],
                "exit_code": self.exit_code, "elapsed_s": round(self.elapsed_s, 3),
                "message": self.message}


def _open_new_log(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    candidate = path
    stem, n = path.stem, 0
    while True:
        try:
            return candidate, open(candidate, "xb", buffering=0)
        except FileExistsError:
            n += 1
            candidate = path.with_name(f"{stem}.{n}.log")


def launch(spec: LaunchSpec) -> Launched:
    """Start the server in a new session; return its identity (pid, start time, group)."""
    log_path, logf = _open_new_log(Path(spec.log_path))
    try:
        popen = subprocess.Popen(
            list(spec.argv), start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=logf, stderr=subprocess.STDOUT, env=dict(spec.env), cwd=str(spec.cwd),
            close_fds=True,
        )
    finally:
        logf.close()
    try:
        ct = psutil.Process(popen.pid).create_time()
    except psutil.NoSuchProcess:  # died at once; keep going, the caller sees the exit code
        ct = time.time()
    return Launched(popen=popen, pid=popen.pid, create_time=ct, pgid=popen.pid, sid=popen.pid,
                    log_path=log_path)


def _cmdline(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline()) or p.name()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return "?"


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def run_processes(pid: int, pgid: int, sid: int, create_time: float) -> list[psutil.Process]:
    """Every live process of a run: same group, same session, or descendant of the leader.

    Processes created before the leader (a reused id) are excluded. Our own process is never
    included.
    """
    found: dict[int, psutil.Process] = {}
    me = os.getpid()
    earliest = create_time - 0.05
    try:
        leader = psutil.Process(pid)
        if abs(leader.create_time() - create_time) <= 0.05:
            if _alive(leader):
                found[pid] = leader
            for c in leader.children(recursive=True):
                found.setdefault(c.pid, c)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        pass
    for p in psutil.process_iter(["pid", "create_time"]):
        if p.pid == me or p.pid in found:
            continue
        try:
            if (p.info["create_time"] or 0) < earliest:
                continue
            if os.getpgid(p.pid) == pgid or os.getsid(p.pid) == sid:
                found[p.pid] = p
        except (ProcessLookupError, PermissionError, OSError):
            continue
    return sorted((p for p in found.values() if p.pid != me and _alive(p)), key=lambda p: p.pid)


def describe(procs: list[psutil.Process]) -> list[ProcInfo]:
    return [ProcInfo(p.pid, _cmdline(p)) for p in procs]


def _signal_all(pgid: int, procs: list[psutil.Process], sig: int) -> list[int]:
    sent = []
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for p in procs:
        try:
            p.send_signal(sig)
            sent.append(p.pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    return sent


async def _wait_gone(ident: tuple[int, int, int, float], popen: subprocess.Popen | None,
                     deadline: float) -> list[psutil.Process]:
    while True:
        if popen is not None:
            popen.poll()
        left = run_processes(*ident)
        if not left or time.monotonic() >= deadline:
            return left
        await asyncio.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


async def stop_run(pid: int, pgid: int, sid: int, create_time: float, grace_s: float,
                   popen: subprocess.Popen | None = None) -> StopResult:
    """SIGTERM the run, wait up to ``grace_s``, SIGKILL what is left, confirm none remains."""
    t0 = time.monotonic()
    ident = (pid, pgid, sid, create_time)
    procs = run_processes(*ident)
    res = StopResult(ok=False, was_running=bool(procs))
    if procs:
        res.signalled = _signal_all(pgid, procs, signal.SIGTERM)
        left = await _wait_gone(ident, popen, t0 + grace_s)
        if left:
            res.killed = _signal_all(pgid, left, signal.SIGKILL)
            left = await _wait_gone(ident, popen, time.monotonic() + KILL_CONFIRM_S)
        res.remaining = describe(left)
    if popen is not None:
        try:
            res.exit_code = popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            res.exit_code = None
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


# ---- logs of a run ------------------------------------------------------------------------
def tail_lines(path: str | Path, n: int = 50, max_bytes: int = 256 * 1024) -> list[str]:
    """The last ``n`` lines of a file (invalid UTF-8 replaced); [] if it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > max_bytes and lines:
        lines = lines[1:]  # first one is probably partial
    return lines[-n:]


def prune_logs(log_dir: str | Path, keep: int, protect: tuple[str | Path, ...] = ()) -> list[Path]:
    """Delete the oldest ``*.log`` files beyond ``keep`` (never one in ``protect``)."""
    d = Path(log_dir)
    if not d.is_dir():
        return []
    keep_set = {str(Path(p).resolve()) for p in protect}
    logs = []
    for p in d.glob("*.log"):
        try:
            logs.append((p.stat().st_mtime, p))
        except OSError:
            continue
    logs.sort(reverse=True)
    removed = []
    for _, p in logs[keep:]:
        if str(p.resolve()) in keep_set:
            continue
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed
