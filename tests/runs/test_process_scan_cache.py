"""The run's processes are read afresh (every process on the machine looked at) each second
while the run is not ready; once it is ready, only when the leader changed, a listed process
is gone, or RESCAN_S after the last reading. Real processes: a leader that starts a child
on SIGUSR1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil

from server_control.host import identity
from server_control.host.start_ticks import proc_start
from server_control.model.vocabulary import RunState
from server_control.supervision import run_processes
from server_control.supervision.run_processes import RESCAN_S, RunProcesses

LEADER = (
    "import signal, subprocess, sys, time\n"
    "kids = []\n"
    "signal.signal(signal.SIGUSR1, lambda *a: kids.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def _until(cond, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_ready_run_reads_processes_afresh_only_when_due(monkeypatch):
    argv = [sys.executable, "-c", LEADER]
    leader = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
        ident = identity.RunIdentity(
            leader.pid, psutil.Process(leader.pid).create_time(), tuple(argv), start=proc_start(leader.pid)
        )
        rec = SimpleNamespace(identity=lambda: ident)
        sup = SimpleNamespace(state=RunState.STARTING)
        reads = []
        real = identity.run_processes
        monkeypatch.setattr(run_processes.identity, "run_processes", lambda i: reads.append(1) or real(i))
        rp = RunProcesses(sup)  # type: ignore[arg-type]

        def pids(now: float) -> list[int]:
            return [p.pid for p in rp._processes(rec, now)]  # type: ignore[arg-type]

        assert pids(100.0) == [leader.pid] and pids(101.0) == [leader.pid]
        assert len(reads) == 2  # not ready (starting): every second
        sup.state = RunState.READY
        os.kill(leader.pid, signal.SIGUSR1)
        _until(lambda: len(psutil.Process(leader.pid).children()) == 1, "the leader's child")
        child = psutil.Process(leader.pid).children()[0].pid
        assert pids(102.0) == [leader.pid] and pids(101.0 + RESCAN_S - 0.5) == [leader.pid]
        assert len(reads) == 2  # ready: the last reading (at 101), its processes all running
        assert pids(101.0 + RESCAN_S + 0.1) == sorted([leader.pid, child]) and len(reads) == 3  # due
        os.kill(child, signal.SIGKILL)
        _until(lambda: not identity.alive(psutil.Process(child)) if psutil.pid_exists(child) else True, "child gone")
        assert pids(103.0 + RESCAN_S) == [leader.pid] and len(reads) == 4  # a listed process is gone: afresh
        other = identity.RunIdentity(ident.pid, ident.create_time + 5, ident.argv, start=None)
        rec.identity = lambda: other  # another leader (its start differs): afresh
        assert pids(103.5 + RESCAN_S) == [] and len(reads) == 5
        rp.forget()
        rec.identity = lambda: ident
        pids(104.0 + RESCAN_S)
        assert len(reads) == 6
    finally:
        try:
            os.killpg(leader.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        leader.wait(5)


def test_a_ready_leader_is_watched_through_a_pidfd(monkeypatch):
    """live() (four times a second) reads nothing from /proc for a ready run's leader verified
    within RESCAN_S; its exit (SIGKILL, not yet reaped: a zombie) is seen at the next call."""
    argv = [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)"]
    leader = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == "ready"
        ct = psutil.Process(leader.pid).create_time()
        ident = identity.RunIdentity(leader.pid, ct, tuple(argv), start=proc_start(leader.pid))
        verified = []
        rec = SimpleNamespace(
            pid=leader.pid, create_time=ct, start=ident.start, identity=lambda: ident,
            leader=lambda: verified.append(1) or identity.verified_leader(ident),
        )  # fmt: skip
        sup = SimpleNamespace(state=RunState.STARTING)
        rp = RunProcesses(sup)  # type: ignore[arg-type]
        assert rp.live(rec)  # type: ignore[arg-type]
        first = len(verified)
        assert rp.live(rec) and len(verified) > first  # type: ignore[arg-type]  # starting: in full each time
        starting = len(verified)
        sup.state = RunState.READY
        assert all(rp.live(rec) for _ in range(8)) and len(verified) == starting  # type: ignore[arg-type]
        monkeypatch.setattr(run_processes, "RESCAN_S", 0.0)  # due: verified in full again
        assert rp.live(rec) and len(verified) > starting  # type: ignore[arg-type]
        monkeypatch.setattr(run_processes, "RESCAN_S", 10.0)
        rp.live(rec)  # type: ignore[arg-type]
        n = len(verified)
        assert rp.live(rec) and len(verified) == n  # type: ignore[arg-type]
        os.kill(leader.pid, signal.SIGKILL)
        _until(lambda: psutil.Process(leader.pid).status() == psutil.STATUS_ZOMBIE, "the leader a zombie")
        assert not rp.live(rec)  # type: ignore[arg-type]
        assert rp._pidfd is None
    finally:
        leader.kill()
        leader.wait(5)
