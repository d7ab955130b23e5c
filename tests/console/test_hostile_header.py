"""The console's header and panels show a hostile server's /server_info fields and log
lines (CSI, OSC title / OSC 52 / OSC 8, DCS, C1) as their visible text only."""

from __future__ import annotations

from console.app import SpecConsoleApp
from server_control.session.session import Session
from tests.console.screen_text import screen_text, wait_for
from tests.control.conftest import start_stand
from tests.control.stock_server import VISIBLE
from tests.support.hostile import assert_clean


async def test_header_and_log_show_only_the_visible_text(tmp_path):
    stand = start_stand(tmp_path, "hostile")
    try:
        app = SpecConsoleApp(Session.attach(stand.url, log_path=stand.log_path, poll_interval_s=0.25))
        async with app.run_test(size=(200, 50)) as pilot:
            await wait_for(pilot, lambda: f"model-{VISIBLE}" in screen_text(app), what="the model in the header")
            await wait_for(pilot, lambda: f"#new-seq: 1, {VISIBLE}" in screen_text(app), what="the log lines")
            assert_clean(screen_text(app), "console screen")
            assert_clean(repr(app.session.snapshot().to_json()), "the session snapshot")
    finally:
        stand.stop()
