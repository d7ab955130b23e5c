"""Plain text of what a running (test) app shows: for assertions on the whole screen; and
waiting (under Pilot) until the app shows something."""
from __future__ import annotations

import time


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


async def answer_prompt(pilot, app, text: str) -> None:
    """Type ``text`` into the open prompt and press enter."""
    from textual.widgets import Input

    from console.screens.prompt import PromptScreen
    assert isinstance(app.screen, PromptScreen), app.screen
    app.screen.query_one(Input).value = text
    await pilot.press("enter")
    await pilot.pause()
