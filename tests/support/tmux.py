"""A console in a real tmux session on its own socket: keys by send-keys, the screen by
capture-pane (tests/console/*_tmux.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

from server_control.state import runs

REPO = Path(__file__).resolve().parents[2]


class Term:
    def __init__(self, tmp_path: Path, term: str = "xterm", size=(120, 40)) -> None:
        self.sock = f"specconsole-i14-{os.getpid()}"
        self.state = tmp_path / "state"
        self.env = {k: v for k, v in os.environ.items() if k not in ("COLORTERM", "TMUX", "NO_COLOR")}
        self.env.update(TERM=term, PYTHONPATH=str(REPO), SPECCONSOLE_STATE_DIR=str(self.state))
        self.size = size

    def tmux(self, *args, **kw):
        return subprocess.run(["tmux", "-L", self.sock, *args], env=self.env, timeout=10, **kw)

    def start(self, cmd: str) -> None:
        self.tmux("new-session", "-d", "-s", "t", "-x", str(self.size[0]), "-y", str(self.size[1]), cmd, check=True)

    def screen(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "t", capture_output=True, text=True).stdout

    def keys(self, *k: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "t", *(["-l"] if literal else []), *k, check=True)

    def wait(self, cond, timeout=60.0, what="condition", escapes: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.screen(escapes=escapes)
            if cond(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{self.screen()}")

    def close(self) -> None:
        """End the tmux server, then every run still live in this terminal's state dirs (the
        demo's is ``<state>/demo``), by its recorded process group: a test that failed before
        its own stop never leaves a simulator behind."""
        self.tmux("kill-server", capture_output=True)
        end_runs(self.state)


def end_runs(state: Path) -> None:
    """End every run recorded under ``state`` (and its sub-directories: the demo's is
    ``<state>/demo``) and the ``supervise`` process a console handed it to, by the pids and
    groups their records name (a supervisor left alive would start the server again)."""
    for d in (state, *(p for p in state.glob("*") if p.is_dir())):
        for rec in runs.list_records(d):
            sup_pid = (rec.supervisor or {}).get("pid")
            if isinstance(sup_pid, int) and sup_pid > 1 and sup_pid != os.getpid():
                try:
                    if "supervise" in " ".join(psutil.Process(sup_pid).cmdline()):
                        os.kill(sup_pid, signal.SIGKILL)
                except (psutil.Error, ProcessLookupError, PermissionError):
                    pass
            if rec.is_live():
                try:
                    os.killpg(rec.pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
