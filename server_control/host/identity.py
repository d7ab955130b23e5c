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
* ``members`` are (pid, start time, start ticks) recorded while the leader was verified.
  They are what identifies orphaned ranks once the leader is gone; a group or session
  whose leader is gone is never taken for the run (a daemon's orphaned group looks the same).

"Start time" is the clock-independent ``ProcStart`` (server_control/host/start_ticks.py: boot id
+ start ticks since boot; the leader's and its members' share the boot). psutil's epoch
``create_time`` moves whenever the wall clock is stepped, so it is compared only for a
record written before start ticks were recorded (``start`` None), within
``LEGACY_TOLERANCE_S``; a supervisor that verifies such a leader records its ``ProcStart``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

from server_control.host.start_ticks import ProcStart, proc_start, start_ticks

# Only for records without start ticks: psutil's epoch start time of one process moves by
# whole seconds as the wall clock is stepped (its boot time, /proc/stat btime, moves).
LEGACY_TOLERANCE_S = 1.5  # a 1 s step of btime, plus float rounding at ~1.8e9 s
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MASK = "****"  # a masked argument matches anything (keys never reach a command line)


@dataclass(frozen=True)
class RunIdentity:
    pid: int
    create_time: float
    argv: tuple[str, ...]
    members: tuple[tuple[int, float, int | None], ...] = ()  # (pid, create_time, start ticks)
    titles: tuple[str, ...] = ()  # command lines the leader took later (setproctitle), as seen
    start: ProcStart | None = None  # None: a record of an earlier version (epoch time only)

    def member_start(self, ticks: int | None) -> ProcStart | None:
        """A member's ``ProcStart``: its ticks in the leader's boot (members are recorded
        only while the leader is verified, so they started in that boot)."""
        return ProcStart(self.start.boot_id, ticks) if self.start is not None and ticks is not None else None


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
        return len(actual) == len(e) and all(x == y or y == MASK for x, y in zip(actual, e))
    if len(actual) < len(e) + 1:
        return False
    return all(x == y or y == MASK for x, y in zip(actual[len(actual) - len(e) :], e))


def same_process(p: psutil.Process, create_time: float, start: ProcStart | None = None) -> bool:
    """``p`` (a pid now) is the recorded process and not a zombie: its ``ProcStart`` is the
    recorded one, whatever the wall clock did since; without a recorded ``start`` (an
    earlier version's record) its epoch start time is within ``LEGACY_TOLERANCE_S``."""
    try:
        if start is not None:
            same = proc_start(p.pid) == start
        else:
            same = abs(p.create_time() - create_time) <= LEGACY_TOLERANCE_S
        return same and p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False


def started_at(p: psutil.Process) -> float:
    """When ``p`` started in seconds since boot, comparable between live processes however
    the wall clock moves: its start ticks (Linux), else psutil's epoch start minus boot time."""
    ticks = start_ticks(p.pid)
    if ticks is not None:
        return ticks / CLOCK_TICKS
    return p.create_time() - psutil.boot_time()


def title(cmdline: Sequence[str]) -> str:
    return " ".join(cmdline)


def verified_leader(ident: RunIdentity) -> psutil.Process | None:
    """The run's leader if it still runs: pid, start time and command line all match (the
    launched one, or a title the leader was seen to take by a process that verified it)."""
    try:
        p = psutil.Process(ident.pid)
        if not same_process(p, ident.create_time, ident.start):
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
        return p if same_process(p, ident.create_time, ident.start) else None
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


def _add_group_and_session(leader: psutil.Process, found: dict[int, psutil.Process]) -> None:
    """Add the processes of the leader's process group or session started after it."""
    pgid: int | None
    sid: int | None
    try:
        pgid, sid = os.getpgid(leader.pid), os.getsid(leader.pid)
    except OSError:
        pgid = sid = None
    try:
        earliest = started_at(leader)  # nothing older than the leader is of its run
    except psutil.Error:
        pgid = None
    if pgid is None:
        return
    # 0 (or 1): the group or session leader lives outside this pid namespace, where every
    # process of the container shares it: matching on it would take in strangers
    group = pgid if pgid > 1 else None
    session = sid if sid is not None and sid > 1 else None
    if group is None and session is None:
        return
    for p in psutil.process_iter():
        if p.pid in found:
            continue
        try:  # the group and session first: two system calls, where the start time reads /proc
            if (os.getpgid(p.pid) == group or os.getsid(p.pid) == session) and started_at(p) >= earliest:
                found[p.pid] = p
        except (psutil.Error, OSError):
            continue


def run_processes(ident: RunIdentity) -> list[psutil.Process]:
    """Every live process of the run (never our own process), sorted by pid."""
    found: dict[int, psutil.Process] = {}
    leader = verified_leader(ident)
    if leader is not None:
        found[leader.pid] = leader
        for c in _descendants(leader):
            found.setdefault(c.pid, c)
        _add_group_and_session(leader, found)
    for pid, ct, ticks in ident.members:
        if pid in found:
            continue
        try:
            p = psutil.Process(pid)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        if same_process(p, ct, ident.member_start(ticks)):
            found[pid] = p
            for c in _descendants(p):
                found.setdefault(c.pid, c)
    me = os.getpid()
    return sorted((p for p in found.values() if p.pid != me and alive(p)), key=lambda p: p.pid)


def member_pairs(procs: list[psutil.Process], leader_pid: int) -> list[tuple[int, float, int | None]]:
    """(pid, epoch start time, start ticks) of the non-leader processes, to record as the
    run's members."""
    out = []
    for p in procs:
        if p.pid == leader_pid:
            continue
        try:
            out.append((p.pid, p.create_time(), start_ticks(p.pid)))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
    return out
