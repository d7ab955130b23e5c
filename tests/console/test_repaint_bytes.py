"""What reaches the terminal when little changes (issue 24): a run of one style is sent
once, a panel whose figure changed repaints only that figure's cells, a change is painted
once, an equal line paints nothing. The bytes per second are in benchmarks/console_cost.py."""

from __future__ import annotations

import re

from textual.geometry import Region

from console.driver import merge_sgr
from console.widgets.line_repaint import changed_span
from server_control.host.ports import free_port
from tests.console.screen_text import screen_text, shows, terminal_output

SGR = re.compile(r"\x1b\[([0-9;]*)m")


def drawn(data: str) -> list[tuple[str, str]]:
    """Each character written with the terminal's style state at that point (the params set
    since the last reset, in order): what a terminal would draw, cursor moves aside."""
    out: list[tuple[str, str]] = []
    state: list[str] = []
    pos = 0
    for m in [*SGR.finditer(data), None]:
        end = m.start() if m else len(data)
        out.extend((ch, ";".join(state)) for ch in data[pos:end])
        if m is None:
            break
        params = m.group(1)
        state = [] if params in ("", "0") else [*state, params]
        pos = m.end()
    return out


def test_a_run_of_one_style_is_sent_once_and_draws_the_same():
    row = "\x1b[39;48;5;16m \x1b[0m" * 100 + "\x1b[1;31mN=5\x1b[0m" + "\x1b[32m\u2585\x1b[0m" * 50
    merged = merge_sgr("\x1b[0m" + row)
    assert len(merged) < len(row) / 8, f"{len(merged)} of {len(row)} characters: the runs were not merged"
    assert drawn(merged) == drawn("\x1b[0m" + row), "the merged bytes draw other cells or styles"


def test_styles_that_differ_are_kept():
    data = "\x1b[0m\x1b[1mA\x1b[0m\x1b[2mB\x1b[0mC\x1b[0m\x1b[1;31mD\x1b[0m\x1b[31mE\x1b[0m\x1b[5;1H\x1b[31mF\x1b[0m"
    assert drawn(merge_sgr(data)) == drawn(data)
    # a style set on top of an unknown state is not assumed to be the whole state
    unknown = "\x1b[1mA\x1b[0m\x1b[1mB\x1b[0m"
    assert drawn(merge_sgr(unknown)) == drawn(unknown)


def test_changed_span_is_the_cells_that_differ():
    from rich.segment import Segment
    from textual.strip import Strip

    a = Strip([Segment("tok/s ", None), Segment("512", None), Segment(" acc 2.80", None)])
    b = Strip([Segment("tok/s ", None), Segment("999", None), Segment(" acc 2.80", None)])
    assert changed_span(a, b, 30) == (6, 9)
    assert changed_span(a, a, 30) is None


def _status_strip(text: str):
    """A status-bar-like line: its fields (split at double spaces) in alternating styles."""
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    styles = [Style(bold=True), Style(dim=True)]
    return Strip([Segment(part + "  ", styles[i % 2]) for i, part in enumerate(text.split("  "))])


def _columns(strip, width: int) -> list:
    """The line as a terminal holds it: one (character, style) per column, blank past its end."""
    cells = [(ch, seg.style) for seg in strip for ch in seg.text]
    return (cells + [(" ", None)] * width)[:width]


def test_the_changed_span_painted_over_the_old_line_gives_the_new_one():
    """The terminal keeps each column's cell: the span's cells of the new line, painted over
    the old line column by column, must give the new line, also where a field grew or shrank
    and the rest of the line moved (the status bar showed `up 8p 5s` and `READY  id idle`)."""
    width = 120
    pairs = [
        ("READY  up 7s  restarts 0  model m  TP 2", "READY  up 10s  restarts 0  model m  TP 2"),
        ("READY  up 59s  restarts 0  TP 2", "READY  up 1m  restarts 0  TP 2"),
        ("STARTING  idle  pid 7  up 4s  TP 2", "READY  idle  pid 7  up 5s  TP 2"),
        ("READY  up 5s", "READY  up 6s"),
        ("x  a  b", "x  a  b  c  d"),
        ("x  a  b  c  d", "x  a"),
    ]
    for before, after in pairs:
        old, new = _status_strip(before), _status_strip(after)
        span = changed_span(old, new, width)
        screen = _columns(old, width)
        if span is not None:
            start, end = span
            screen[start:end] = _columns(new, width)[start:end]
        assert "".join(ch for ch, _ in screen).rstrip() == (after + "  ").rstrip(), (before, after, span)


def test_the_real_console_sends_no_reset_followed_by_the_same_style():
    out = terminal_output("attach", f"http://127.0.0.1:{free_port()}").decode("utf-8", "replace")
    assert "verify" in out, "the console did not draw its screen"
    # a reset, a style, its text, a reset and the same style again: a run sent segment by segment
    repeated = re.findall(r"\x1b\[0m(\x1b\[[0-9;]+m)[^\x1b]*\x1b\[0m\1", out)
    assert not repeated, f"{len(repeated)} runs of one style were sent segment by segment"


class Repaints:
    """The regions a widget class marks dirty and the times it renders, from now on."""

    def __init__(self, monkeypatch, cls) -> None:
        self.regions: list[Region | None] = []
        self.renders = 0
        refresh, render = cls.refresh, cls.render

        def counted_refresh(widget, *regions, **kw):
            self.regions.extend(regions or [None])
            return refresh(widget, *regions, **kw)

        def counted_render(widget):
            self.renders += 1
            return render(widget)

        monkeypatch.setattr(cls, "refresh", counted_refresh)
        monkeypatch.setattr(cls, "render", counted_render)


async def test_a_changed_figure_repaints_its_cells_once_and_an_equal_snapshot_nothing(fake, make_app, monkeypatch):
    from console.widgets.live_panel import LivePanel

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "tok/s 512")
        seen = Repaints(monkeypatch, LivePanel)
        fake.publish("snapshot")  # the same snapshot again
        await pilot.pause(0.8)
        assert seen.regions == [] and seen.renders == 0, "an equal snapshot repainted the live panel"
        fake.snap["live"]["gen_throughput"] = 999.0
        fake.publish("snapshot")
        await shows(pilot, app, "tok/s 999")
        assert seen.regions and None not in seen.regions, "the whole panel was marked dirty for one figure"
        assert all(r.height == 1 and r.width <= 3 for r in seen.regions), seen.regions
        assert seen.renders == 1, f"the change was rendered {seen.renders} times"
        assert "tok/s 999" in screen_text(app)


async def test_the_status_lines_repaint_only_what_changed(fake, make_app, monkeypatch):
    from console.widgets.status_bar import StatusBar

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "up 1h02m")
        seen = Repaints(monkeypatch, StatusBar)
        fake.publish("snapshot")
        await pilot.pause(0.8)
        assert seen.regions == [], "an equal snapshot repainted the status lines"
        fake.snap["run"]["uptime_s"] = 3725.0 + 60
        fake.publish("snapshot")
        await shows(pilot, app, "up 1h03m")
        assert seen.regions and None not in seen.regions, "both lines were repainted for one digit"
        assert all(r.height == 1 and r.width <= 2 for r in seen.regions), seen.regions


async def test_the_log_status_line_repaints_only_its_counter(fake, make_app, monkeypatch):
    from console.widgets.log.pane import LogStatus

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "FOLLOW")
        seen = Repaints(monkeypatch, LogStatus)
        app.log_view.flush()  # nothing new: the same status
        await pilot.pause(0.3)
        assert seen.regions == [], "an equal status line was repainted"
        fake.add_lines(["[2026-11-29 10:00:00 TP0] tick line 1"])  # "8 of 8 shown" -> "9 of 9 shown"
        await shows(pilot, app, "tick line 1")
        assert seen.regions and None not in seen.regions, "the whole status line was repainted"
        assert all(r.height == 1 and r.width <= 6 for r in seen.regions), seen.regions


async def test_log_rows_reach_a_following_view_at_most_once_a_second(fake, make_app, monkeypatch):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "FOLLOW")
        view = app.log_view
        fake.add_lines(["[2026-11-29 10:00:00 TP0] first"])
        assert view.flush() == 1  # rows added now
        waits: list[float] = []
        timer = view.set_timer
        monkeypatch.setattr(view, "set_timer", lambda wait, cb: waits.append(wait) or timer(wait, cb))
        view._flush_pending = False
        view.notify_new()  # more lines right after
        assert waits and waits[0] >= 0.9, f"the next rows would be drawn after {waits} s"
        fake.add_lines(["[2026-11-29 10:00:00 TP0] second"])
        await shows(pilot, app, "second", timeout=10)


async def test_the_uptime_past_a_minute_does_not_tick_every_second(fake, make_app, monkeypatch):
    from console.widgets.status_bar import StatusBar

    fake.snap["run"]["uptime_s"] = 125.0
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await shows(pilot, app, "up 2m")
        seen = Repaints(monkeypatch, StatusBar)
        fake.snap["run"]["uptime_s"] = 126.0
        fake.publish("snapshot")
        await pilot.pause(0.8)
        assert seen.regions == [], "a second more of uptime repainted the status line"
        fake.snap["run"]["uptime_s"] = 185.0
        fake.publish("snapshot")
        await shows(pilot, app, "up 3m")
