"""`D` (issue 35 item 6): the top of the server screen in full. At 80x24 the status lines,
the latency and the advice are cut with an ellipsis; the details screen holds every line
whole, wrapped. Real app under Pilot on the fake session's snapshot."""

from __future__ import annotations

from console.app import SpecConsoleApp
from console.screens.details import DetailsScreen
from tests.console.fakes import FakeSession
from tests.console.screen_text import screen_text


async def test_d_shows_the_cut_lines_whole_at_80_columns():
    app = SpecConsoleApp(FakeSession())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.2)
        before = screen_text(app)
        assert "\u2026" in before and "p99" not in before  # cut at 80 columns; no p99 on the line
        await pilot.press("D")
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen)
        text = app.screen.text.plain
        assert "latency (last 14 s, 40 requests done): TTFT p50 31 ms p95 49 ms p99 86 ms" in text
        assert "ITL mean by mode speculative 21 ms, target-only 16 ms" in text  # the split, whole
        assert "queue p50 0 ms" in text and "why this mode" in text and "status" in text
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, DetailsScreen)
