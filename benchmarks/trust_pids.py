"""What the trust audit started, by pid (benchmarks/trust_audit.py): every pid a run record
named (leader, process group, members, keeper, supervisor, launcher), every process a check
started itself (supervise, fleet commands, ssh and what they forked, simulators, remote
commands under the audit's sshd), each with its start time so a reused pid is never taken
for ours. ``alive()`` says which of them still run; nothing here looks a process up by name."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from server_control.state import runs


@dataclass(frozen=True)
class Owned:
    pid: int
    create_time: float
    what: str


def _running(pid: int, create_time: float | None = None) -> bool:
    try:
        p = psutil.Process(pid)
        if create_time is not None and abs(p.create_time() - create_time) > 0.05:
            return False  # the pid was reused: not ours
        return p.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


class OwnPids:
    def __init__(self) -> None:
        self.procs: dict[int, Owned] = {}
        self.groups: dict[int, str] = {}
        self.exempt: set[int] = set()  # the audit's own rig (its sshd listener)

    def note(self, pid: int | None, what: str) -> None:
        if not pid or pid <= 1 or pid == os.getpid() or pid in self.procs or pid in self.exempt:
            return
        try:
            self.procs[pid] = Owned(pid, psutil.Process(pid).create_time(), what)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass  # already gone: nothing to check later

    def note_tree(self, pid: int, what: str) -> None:
        """``pid`` and every process it has started so far (ssh it forked, for one)."""
        self.note(pid, what)
        try:
            for child in psutil.Process(pid).children(recursive=True):
                self.note(child.pid, f"{what}'s child")
        except psutil.NoSuchProcess:
            pass

    def note_group(self, pgid: int | None, what: str) -> None:
        if pgid and pgid > 1 and pgid != os.getpgid(0):
            self.groups.setdefault(pgid, what)

    def note_record(self, rec: runs.RunRecord) -> None:
        self.note(rec.pid, f"run {rec.name} leader")
        self.note_group(rec.pgid, f"run {rec.name} group")
        self.note(rec.keeper_pid, f"run {rec.name} keeper")
        self.note(rec.launcher_pid, f"run {rec.name} launcher")
        if isinstance(rec.supervisor, dict) and isinstance(rec.supervisor.get("pid"), int):
            self.note(rec.supervisor["pid"], f"run {rec.name} supervisor")
        for m in rec.members:
            if isinstance(m, list) and m and isinstance(m[0], int):
                self.note(m[0], f"run {rec.name} member")

    def note_records(self, state_dir: str | Path | None) -> None:
        """Every run record in ``state_dir`` (those a check damaged on purpose are skipped)."""
        try:
            for rec in runs.list_records(state_dir):
                self.note_record(rec)
        except Exception:  # noqa: BLE001 - a damaged state dir is some check's subject, not the tracker's
            pass

    def alive_pids(self) -> dict[int, str]:
        out = {o.pid: o.what for o in self.procs.values() if _running(o.pid, o.create_time)}
        if self.groups:
            for p in psutil.process_iter():
                try:
                    pgid = os.getpgid(p.pid)
                except (ProcessLookupError, PermissionError):
                    continue
                if pgid in self.groups and p.pid not in out and p.pid not in self.exempt and _running(p.pid):
                    out[p.pid] = self.groups[pgid]
        return out

    def alive(self) -> list[str]:
        return [f"{what} pid {pid}" for pid, what in self.alive_pids().items()]

    def wait_gone(self, timeout_s: float) -> list[str]:
        """What still runs after up to ``timeout_s`` (a keeper ends a moment after its server)."""
        deadline = time.monotonic() + timeout_s
        left = self.alive()
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = self.alive()
        return left

    def end_all(self) -> None:
        """SIGKILL what is left, each by the pid found alive above (after it was counted)."""
        for pid in self.alive_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
