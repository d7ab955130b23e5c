"""End to end in a real terminal: `specconsole demo` in a tmux session of a fixed size,
keys sent with send-keys, the screen read with capture-pane. Stops what it started: the
tmux server on its own socket, and the simulator by the pgid in its run record."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support.tmux import end_runs

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]
REPO = Path(__file__).resolve().parents[2]


def test_demo_in_tmux(tmp_path):
    sock = f"specconsole-test-{os.getpid()}"
    state = tmp_path / "state"
    tmux = ["tmux", "-L", sock]
    env = {k: v for k, v in os.environ.items() if k not in ("COLORTERM", "TMUX")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(REPO), SPECCONSOLE_STATE_DIR=str(state))
    cmd = f"{sys.executable} -m console demo --port {free_port()} --time-scale 10 --no-mouse; sleep 30"

    def screen() -> str:
        out = subprocess.run([*tmux, "capture-pane", "-p", "-t", "demo"], capture_output=True, text=True, env=env, timeout=10)
        return out.stdout

    def wait(cond, timeout=60.0, what="condition") -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = screen()
            if cond(text):
                return text
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}:\n{screen()}")

    def keys(*k: str, literal: bool = False) -> None:
        subprocess.run([*tmux, "send-keys", "-t", "demo", *(["-l"] if literal else []), *k], env=env, check=True, timeout=10)

    rec = None
    subprocess.run([*tmux, "new-session", "-d", "-s", "demo", "-x", "160", "-y", "48", cmd], env=env, check=True, timeout=10)
    try:
        wait(lambda s: "READY" in s and "N=5" in s, what="READY and N=5")
        rec = runs.load_record("demo", state / "demo")
        assert rec is not None and rec.is_live()
        keys("+", literal=True)
        wait(lambda s: "N=6 applied" in s, what="N=6 applied after +")
        keys("-", literal=True)
        wait(lambda s: "N=5 applied" in s, what="N=5 applied after -")
        # the header counts switches (a switch line in the log tail scrolls away within a second on a loaded machine)
        text = wait(
            lambda s: "switched to target-only" in s or "target-only  " in s or re.search(r"switches [1-9]", s) is not None,
            timeout=90,
            what="a mode switch on screen",
        )
        assert "switches" in text
        keys("q")
        wait(lambda s: "Leave simulator running" in s, what="quit question")
        keys("s")  # stop the simulator (Enter would leave it running, as for a real server)
        deadline = time.monotonic() + 30
        while rec.is_live() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not rec.is_live(), "quitting the demo with s stops the simulator"
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, timeout=10, capture_output=True)
        end_runs(state)  # whatever the test reached: the demo, and a supervise it was handed to
        if rec is not None and rec.is_live():
            try:
                os.killpg(rec.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
