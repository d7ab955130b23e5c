"""Plain text of what a running (test) app shows: for assertions on the whole screen; and
waiting (under Pilot) until the app shows something; what the real console writes to a
pseudo-terminal."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def screen_text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


def toasts(app) -> str:
    """The messages of the notifications shown so far, one per line."""
    return "\n".join(n.message for n in app._notifications)


async def wait_for(pilot, cond, what: str = "condition", timeout: float = 30.0, every: float = 0.1) -> None:
    """Let the app run until ``cond()`` holds; on timeout fail with what the screen shows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await pilot.pause(every)
    raise AssertionError(f"timed out waiting for {what}:\n{screen_text(pilot.app)}")


async def settle_log(pilot, app) -> None:
    """Let the log view take in what the fake session's store holds (its flush is timed)."""
    await pilot.pause(0.12)
    app.log_view.flush()
    await pilot.pause()


async def prompt_input(pilot, app, timeout: float = 10.0):
    """The open prompt's Input, once mounted: a key pushes the prompt screen at once, its
    widgets a moment later (a loaded fresh clone queried it in between: NoMatches)."""
    from textual.widgets import Input

    from console.dialogs.prompt import PromptScreen

    deadline = time.monotonic() + timeout
    while not (isinstance(app.screen, PromptScreen) and app.screen.query(Input)) and time.monotonic() < deadline:
        await pilot.pause(0.02)
    assert isinstance(app.screen, PromptScreen), app.screen
    return app.screen.query_one(Input)


async def answer_prompt(pilot, app, text: str) -> None:
    """Type ``text`` into the open prompt and press enter."""
    (await prompt_input(pilot, app)).value = text
    await pilot.press("enter")
    await pilot.pause()


async def shows(pilot, app, text: str, timeout: float = 10.0) -> None:
    """Wait until the screen shows ``text`` and has settled (a loaded machine is slow)."""
    deadline = time.monotonic() + timeout
    while text not in screen_text(app):
        assert time.monotonic() < deadline, f"the screen never showed {text!r}"
        await pilot.pause(0.1)
    await pilot.pause(0.7)


def terminal_output(*args: str, seconds: float = 12.0) -> bytes:
    """What the real console writes to a pseudo-terminal in its first ``seconds`` (it is
    then stopped by its process group)."""
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "console", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=str(REPO),
        start_new_session=True,
    )
    os.close(slave)
    out = b""
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and b"verify" not in out:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    out += os.read(master, 1 << 16)[: 1 << 20]
                except OSError:
                    break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        os.close(master)
    return out
