"""What the console does per event (issue 24): a burst of session events is one snapshot
build, lines that do not reach the screen repaint nothing, the mouse reports no motion.
The figures (CPU, bytes per second) are in benchmarks/console_cost.py, not here."""

from __future__ import annotations

import time
from pathlib import Path

from console.widgets.log.view import LogView
from server_control.host.ports import free_port
from tests.console.screen_text import screen_text, shows, terminal_output

REPO = Path(__file__).resolve().parents[2]
POLL = 'INFO:     127.0.0.1:45566 - "GET /health HTTP/1.1" 200 OK'


def lines(n, start=0):
    return [f"[2026-11-29 10:00:00 TP0] tick line {i}" for i in range(start, start + n)]


class Painted:
    """Counts the log view's rows rendered (``render_line``) from now on."""

    def __init__(self, monkeypatch) -> None:
        self.rows = 0
        render = LogView.render_line

        def counted(view, y):
            self.rows += 1
            return render(view, y)

        monkeypatch.setattr(LogView, "render_line", counted)


async def test_a_burst_of_session_events_is_one_snapshot_build(fake, make_app):
    builds = []
    original = fake.snapshot

    def counted():
        builds.append(time.monotonic())
        return original()

    fake.snapshot = counted
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        before = len(builds)
        for n in range(1, 31):  # 30 polls / NVML samples in one burst; the last one says N=9
            fake.snap["spec"]["threshold"] = 9 if n == 30 else n + 20
            fake.publish("snapshot")
        await pilot.pause(0.6)
        assert 1 <= len(builds) - before <= 2, f"{len(builds) - before} snapshot builds for one burst"
        assert app.snapshot.spec.threshold == 9, "the build after the burst reads the newest state"
        assert "N=9" in screen_text(app)


async def test_a_paused_view_does_not_repaint_for_lines_below_it(fake, make_app, monkeypatch):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        fake.add_lines(lines(300))
        await shows(pilot, app, "tick line 299")
        view = app.log_view
        await pilot.press("f")
        assert not view.follow
        await shows(pilot, app, "PAUSED")
        painted = Painted(monkeypatch)
        fake.add_lines(lines(40, 300))
        await pilot.pause(0.2)
        view.flush()
        await pilot.pause(0.2)
        assert painted.rows == 0, f"{painted.rows} log rows repainted for lines below a paused view"
        assert "40 new lines" in screen_text(app), "the status line still counts them"
        await pilot.press("f")  # following again: the new lines are painted
        await pilot.pause(0.2)
        assert painted.rows > 0 and "tick line 339" in screen_text(app)


async def test_hidden_polling_lines_repaint_no_log_row(fake, make_app, monkeypatch):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        fake.add_lines(lines(50))
        await shows(pilot, app, "tick line 49")
        painted = Painted(monkeypatch)
        fake.add_lines([POLL] * 5)
        await pilot.pause(0.7)
        app.log_view.flush()
        await pilot.pause(0.2)
        assert painted.rows == 0, f"{painted.rows} log rows repainted for polling lines kept back"
        assert "polls hidden" in screen_text(app)


def test_the_mouse_reports_clicks_not_motion_unless_asked():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens: the screen says so
    out = terminal_output("attach", url)
    assert b"verify" in out, "the console did not draw its screen"
    assert b"\x1b[?1000h" in out, "clicks and the wheel are reported"
    assert b"\x1b[?1003h" not in out, "motion tracking is off by default"
    out = terminal_output("attach", url, "--mouse-motion")
    assert b"\x1b[?1003h" in out, "--mouse-motion turns it on"


async def test_an_idle_poll_that_changes_nothing_drawn_repaints_no_panel(fake, make_app, monkeypatch):
    from console.widgets.live_panel import LivePanel

    series = fake.snap["series"]
    n = len(series["batch"])
    for name in ("batch", "mode"):  # an idle server: batch 0, speculative, more polls than fit
        series[name] = [[100.0 + i, 0] for i in range(n + 200)]
    fake.snap["live"]["ts"] = 300.0 + n
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "tok/s")
        renders = []
        render = LivePanel.render
        monkeypatch.setattr(LivePanel, "render", lambda self: renders.append(1) or render(self))
        for name in ("batch", "mode"):  # the next poll: one more point of batch 0, a second later
            series[name] = [[100.0 + i, 0] for i in range(n + 201)]
        fake.snap["live"]["ts"] = 301.0 + n
        fake.publish("snapshot")
        await pilot.pause(0.8)
        assert renders == [], "the live panel repainted a picture that did not change"
        series["batch"][-1][1] = 3  # a decode batch: the picture changes
        fake.publish("snapshot")
        await pilot.pause(0.8)
        assert renders, "a new bar must be drawn"
