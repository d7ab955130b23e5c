"""Who belongs to a run: the recorded leader (pid + start time + command line) and the
members seen while that leader was verified. Nothing else is ever taken for the run.

Linux never hands out a number still in use as a process group or session id, but once a
run is wholly gone its numbers may go to anybody (after a reboot, at once). So:

* the leader is the process with the recorded pid whose start time AND command line are
  the recorded ones (the command's arguments after ``python -m <module>`` end its command
  line: the patched SGLang entry point re-executes itself as ``sglang.launch_server`` with
  the same flags, and a wrapper such as ``timeout N python`` may stand in front), or a
  title it later gave itself (smg: ``smg::router``) as recorded by a process that had
  verified it (``titles``);
* while the leader is verified, its process group, its session and its descendants are
  the run (the numbers cannot have been reused while it lives);
* ``members`` are (pid, start time) pairs recorded while the leader was verified. They
  are what identifies orphaned ranks once the leader is gone; a group or session whose
  leader is gone is never taken for the run (a daemon's orphaned group looks the same).
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

CREATE_TIME_TOLERANCE_S = 0.05
MASK = "****"   # a masked argument matches anything (keys never reach a command line)


@dataclass(frozen=True)
class RunIdentity:
    pid: int
    create_time: float
    argv: tuple[str, ...]
    members: tuple[tuple[int, float], ...] = ()
    titles: tuple[str, ...] = ()   # command lines the leader took later (setproctitle), as seen


def _args(argv: Sequence[str]) -> list[str]:
    argv = list(argv)
    if len(argv) >= 3 and argv[1] == "-m":
        return argv[3:]
    return argv[1:]


def cmdline_matches(actual: Sequence[str], expected: Sequence[str]) -> bool:
    """The recorded arguments (after the interpreter and ``-m module``) end the actual
    command line: the patched entry point re-executes itself as another module, and an
    interpreter wrapper (``timeout N python``) puts words in front. Without recorded
    arguments the whole command lines must be equal. ``****`` matches any one argument."""
    actual, e = list(actual), _args(expected)
    if not e:
        e = list(expected)
        if len(actual) != len(e):
            return False
    if len(actual) < len(e) + 1:
        return False
    return all(x == y or y == MASK for x, y in zip(actual[len(actual) - len(e):], e))


def same_process(p: psutil.Process, create_time: float) -> bool:
    try:
        return abs(p.create_time() - create_time) <= CREATE_TIME_TOLERANCE_S \
            and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


def title(cmdline: Sequence[str]) -> str:
    return " ".join(cmdline)


def verified_leader(ident: RunIdentity) -> psutil.Process | None:
    """The run's leader if it still runs: pid, start time and command line all match (the
    launched one, or a title the leader was seen to take by a process that verified it)."""
    try:
        p = psutil.Process(ident.pid)
        if not same_process(p, ident.create_time):
            return None
        cmdline = p.cmdline()
        if not cmdline_matches(cmdline, ident.argv) and title(cmdline) not in ident.titles:
            return None
        return p
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def retitled_leader(ident: RunIdentity) -> psutil.Process | None:
    """The process with the leader's pid and start time whatever its command line now: only
    for the process that launched the run or verified it before (it saw the same process)."""
    try:
        p = psutil.Process(ident.pid)
        return p if same_process(p, ident.create_time) else None
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True


def _descendants(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.children(recursive=True)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return []


def run_processes(ident: RunIdentity) -> list[psutil.Process]:
    """Every live process of the run (never our own process), sorted by pid."""
    found: dict[int, psutil.Process] = {}
    leader = verified_leader(ident)
    if leader is not None:
        found[leader.pid] = leader
        for c in _descendants(leader):
            found.setdefault(c.pid, c)
        pgid: int | None
        sid: int | None
        try:
            pgid, sid = os.getpgid(leader.pid), os.getsid(leader.pid)
        except OSError:
            pgid = sid = None
        earliest = ident.create_time - CREATE_TIME_TOLERANCE_S
        if pgid is not None:
            for p in psutil.process_iter(["create_time"]):
                if p.pid in found:
                    continue
                try:
                    if (p.info["create_time"] or 0) < earliest:
                        continue
                    if os.getpgid(p.pid) == pgid or os.getsid(p.pid) == sid:
                        found[p.pid] = p
                except (ProcessLookupError, PermissionError, OSError):
                    continue
    for pid, ct in ident.members:
        if pid in found:
            continue
        try:
            p = psutil.Process(pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if same_process(p, ct):
            found[pid] = p
            for c in _descendants(p):
                found.setdefault(c.pid, c)
    me = os.getpid()
    return sorted((p for p in found.values() if p.pid != me and alive(p)), key=lambda p: p.pid)


def member_pairs(procs: list[psutil.Process], leader_pid: int) -> list[tuple[int, float]]:
    """(pid, start time) of the non-leader processes, to record as the run's members."""
    out = []
    for p in procs:
        if p.pid == leader_pid:
            continue
        try:
            out.append((p.pid, p.create_time()))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return out
