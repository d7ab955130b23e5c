"""When a process started, in a form the wall clock cannot move: the boot it started in
(``/proc/sys/kernel/random/boot_id``) and its start time in clock ticks since that boot
(``/proc/<pid>/stat`` field 22, ``starttime``).

psutil's ``create_time()`` is that tick count divided by the tick rate PLUS the boot time
of ``/proc/stat`` (``btime``: the wall clock now minus the uptime). Every step of the wall
clock (NTP, a VM resumed) moves ``btime`` by whole seconds, so the epoch start time of the
same process read an hour apart differs: it is for display and uptime only. A process is
identified by ``ProcStart``: the same pid with the same ``ProcStart`` is the same process
(the kernel cannot hand the pid out again while it lives, and a reboot changes the boot id).

Linux only (the project is): where ``/proc`` cannot be read the functions answer None and
the callers (server_control/host/identity.py) fall back to psutil's epoch start time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
STARTTIME_FIELD = 22  # man 5 proc: (22) starttime %llu


@dataclass(frozen=True)
class ProcStart:
    boot_id: str
    ticks: int  # clock ticks since that boot


@functools.cache
def boot_id() -> str | None:
    """This boot's id (it cannot change while this process lives), or None without /proc."""
    try:
        with open(BOOT_ID_PATH, encoding="ascii") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


def start_ticks(pid: int) -> int | None:
    """``/proc/<pid>/stat`` field 22, or None (no such process, or no /proc). The command
    name (field 2) is in parentheses and may itself hold spaces and parentheses: the fields
    after it start behind the LAST ``)``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2 :].split()[STARTTIME_FIELD - 3])
    except (OSError, ValueError, IndexError):
        return None


def proc_start(pid: int) -> ProcStart | None:
    """The process's ``ProcStart`` now, or None (gone, or /proc not readable)."""
    bid, ticks = boot_id(), start_ticks(pid)
    return ProcStart(bid, ticks) if bid is not None and ticks is not None else None


def recorded(bid: object, ticks: object) -> ProcStart | None:
    """A ``ProcStart`` from recorded JSON values; None where they are absent (a record
    written before start ticks were recorded) or not of the right types."""
    if isinstance(bid, str) and bid and isinstance(ticks, int) and not isinstance(ticks, bool):
        return ProcStart(bid, ticks)
    return None
