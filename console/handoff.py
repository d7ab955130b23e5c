"""A console that quits leaving its server running hands supervision to a detached
`specconsole supervise --handed-off` of that run: its own session (no terminal, so a
closed SSH link does not end it), its output in ``<state dir>/logs/<name>/supervise-*.log``.
It records itself in the run record (``supervisor``, kind ``handoff``); `status` names it;
the next console takes the run back from it (server_control/supervision/ownership.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from server_control.session.run_backends import ProfileRun
from server_control.state.private_files import open_private


@dataclass(frozen=True)
class HandOff:
    pid: int
    log_path: Path

    def words(self) -> str:
        return (
            f"supervision handed to `specconsole supervise` (pid {self.pid}, log {self.log_path}); the next console takes it back"
        )


def hand_off(session, target_args: list[str]) -> HandOff | None:
    """After ``session.close()``: start the detached supervisor if the session supervised a
    run that keeps going (or, when the view hung before the close finished, still supervises
    one: console/exit_watchdog.py). ``target_args`` choose the run (``--profile F --state-dir D``)."""
    run = getattr(session, "run", None)
    if not isinstance(run, ProfileRun) or not (run.needs_handoff or run.supervises_live_run):
        return None
    log_dir = run.handoff_log_dir()
    log_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = log_dir / f"supervise-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    fd = open_private(log_path)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "console", "supervise", *target_args, "--handed-off"],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    return HandOff(proc.pid, log_path)
