"""Issue 23 item 7, the chart over the profile's history: a new console starts its chart
with what the last one recorded and says how old it is; `z`/`Z` zoom out and in (one bar a
poll, 10 min, 1 h, 6 h), `c` shows tok/s and the accept length; restarts (R) and outages
(×) are marked on the time axis. Real app through its Pilot over the fake session."""

from __future__ import annotations

import time

from console.widgets.history_chart import OUTAGE, RESTART
from console.widgets.live_panel import LivePanel
from server_control.state.history import HistPoint
from tests.console.screen_text import screen_text

SIZE = (120, 40)


def history(now: float) -> list[HistPoint]:
    """Run a for three hours (1 min buckets, batch 3), an outage from -6 to -5 min, then run
    b (one point a second, batch 9 and 900 tok/s)."""
    out = [
        HistPoint(t, batch=3, tok_s=300, accept=3.0, n=5, mode=0, run="a", step=60)
        for t in range(int(now - 3 * 3600), int(now - 400), 60)
    ]
    out += [HistPoint(now - 360 + i * 10, up=False, run="a") for i in range(6)]
    out += [HistPoint(now - 300 + i, batch=9, tok_s=900, accept=1.5, n=5, mode=1, run="b") for i in range(300)]
    return out


def chart_lines(app) -> list[str]:
    panel = app.screen.query_one(LivePanel)
    r = panel.content_region
    lines = screen_text(app).splitlines()[r.y : r.y + r.height]
    return [line[r.x : r.x + r.width] for line in lines]


def axis_of(app) -> str:
    return chart_lines(app)[-2]  # the row above the numbers line


async def test_zoom_out_shows_the_history_with_its_restart_and_outage_marked(make_app, fake):
    fake.hist = history(time.time())
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(LivePanel)
        assert panel.border_title == "live"
        assert OUTAGE not in axis_of(app), "the fake's own polls (times 0..n) hold no outage"
        await pilot.press("z")
        await pilot.pause()
        assert panel.border_title == "last 10m"
        axis = axis_of(app)
        assert OUTAGE in axis and RESTART in axis and axis.index(OUTAGE) < axis.index(RESTART), axis
        assert axis.rstrip().endswith("now") and "-3m" in axis, axis
        bars = "".join(chart_lines(app)[:-2])
        assert "\u2592" in bars, "run b was target-only: hatched bars"
        await pilot.press("z", "z")
        await pilot.pause()
        assert panel.border_title == "last 6h"
        await pilot.press("z")  # clamped
        await pilot.pause()
        assert panel.border_title == "last 6h"
        assert "-1h" in axis_of(app) or "-2h" in axis_of(app) or "-3h" in axis_of(app), axis_of(app)
        await pilot.press("c")
        await pilot.pause()
        assert panel.border_title == "last 6h \u00b7 tok/s"
        assert int(chart_lines(app)[0].split()[0]) > 600, "the scale is tok/s, not batch"
        await pilot.press("c")
        await pilot.pause()
        assert panel.border_title.endswith("accept len")
        assert chart_lines(app)[0].strip().startswith("3.0"), chart_lines(app)[0]
        await pilot.press("c", "Z", "Z", "Z", "Z")
        await pilot.pause()
        assert panel.border_title == "live"


async def test_a_new_console_starts_its_chart_with_the_last_record_and_says_how_old(make_app, fake):
    now = time.time()
    fake.hist = [HistPoint(now - 600 + i, batch=i % 10, n=5, mode=int(i % 10 > 5), run="a") for i in range(120)]
    fake.hist.append(HistPoint(now - 470, up=False, run="a"))
    fake.hist_until = now - 470  # all of it read from the file
    for name in fake.snap["series"]:
        fake.snap["series"][name] = []  # this console has polled nothing yet
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(LivePanel)
        assert panel.border_subtitle is not None and panel.border_subtitle.startswith("recorded until 8m ago"), (
            panel.border_subtitle
        )
        width = panel.part.width
        assert 30 < width < 120
        recorded = [p.batch for p in fake.hist if p.up][-width:]
        assert list(panel.part.values) == recorded, "the chart begins with what the earlier console recorded"
        text = "\n".join(chart_lines(app))
        assert "\u2588" in text
        assert OUTAGE in axis_of(app), axis_of(app)


async def test_the_record_fills_the_chart_before_this_consoles_polls_and_only_a_record_is_called_one(make_app, fake):
    """The fake's polls are at times 0..27: a record before them fills the bars to their left;
    this console's own outage before its first poll (the server starting) is no record."""
    fake.hist = [HistPoint(-500.0 + i, batch=11, mode=1, run="a") for i in range(100)]
    fake.hist_until = fake.hist[-1].ts  # the earlier console's; then this one's polls:
    fake.hist += [HistPoint(float(t), batch=b, run="a") for t, b in fake.snap["series"]["batch"]]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(LivePanel)
        width, polls = panel.part.width, len(fake.snap["series"]["batch"])
        assert list(panel.part.values[: width - polls]) == [11.0] * (width - polls)
        assert list(panel.part.values[width - polls :]) == [float(b) for _, b in fake.snap["series"]["batch"]]
        assert panel.border_subtitle == "recorded until 7m before this console", panel.border_subtitle
    fake.hist = [HistPoint(-5.0 + i, up=False, run="a") for i in range(5)]
    fake.hist_until = None  # this console's own outage, nothing read from a file
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        panel = app.screen.query_one(LivePanel)
        assert panel.border_subtitle is None, panel.border_subtitle
        assert len(panel.part.values) == len(fake.snap["series"]["batch"])
