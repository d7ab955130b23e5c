"""The fake session's URL (tests/console/fakes.py, http://127.0.0.1:30000 so the snapshots
stay fixed) is only shown, never contacted: the screen reaches its server through the
session alone. Here the fake names a port this test listens on, the whole screen runs with
its panels, the advice strip and the `A` view open, and nothing may connect. (Before the
advice went through the session, the strip read the fake's URL itself, so the snapshot
tests showed whatever other server held 30000.)"""

from __future__ import annotations

import socket

from console.app import SpecConsoleApp
from tests.console.fakes import FakeSession, sample_snapshot


async def test_nothing_on_the_screen_connects_to_the_fake_sessions_url():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        snap = sample_snapshot()
        snap["url"] = f"http://127.0.0.1:{port}"
        app = SpecConsoleApp(FakeSession(snap))
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.pause(1.5)
            await pilot.press("A")  # the advisor's full view
            await pilot.pause(1.5)
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            conn = None
        if conn is not None:
            conn.close()
        assert conn is None, "something on the screen connected to the fake session's URL"
