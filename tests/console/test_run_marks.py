"""Run boundaries in the mode timeline (issue 23 items 5 and 7): after a restart, a row where
the current run began, placed among the switches by time (the run record's zoned start read
as the log's local time); none for a first run."""

from __future__ import annotations

from datetime import UTC, datetime

from console.widgets.run_marks import mark_index, restart_label
from server_control.model.run_status import RunStatus
from tests.console.screen_text import screen_text


def test_the_mark_goes_between_the_runs():
    start = datetime(2026, 11, 29, 10, 1, 0).astimezone().astimezone(UTC).isoformat()
    times = ["2026-11-29T10:00:30", "2026-11-29 10:00:59.5", "2026-11-29T10:01:02", "10:05:00"]
    assert mark_index(times, start) == 2, "two switches of the run before, the rest of this one"
    assert mark_index(times, None) == 4 and mark_index(times, "not a time") == 4
    assert restart_label(RunStatus(restarts=0)) is None
    assert restart_label(RunStatus(restarts=2, last_exit="killed by SIGKILL")) == "restart 2"


async def test_the_timeline_shows_the_restart(make_app, fake):
    fake.snap["run"]["started_at"] = "2026-11-29T10:01:30"  # between the fake's switches 10:01:02 and 10:01:40
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(0.3)
        rows = [x for x in screen_text(app).splitlines() if "10:01:" in x and ("restart" in x or "switch" not in x)]
        text = "\n".join(rows)
        assert "restart 1" in text, screen_text(app)
        order = [
            x.split("10:01:")[1][:2]
            for x in screen_text(app).splitlines()
            if "10:01:40" in x or "restart 1" in x or "10:01:02" in x
        ]
        assert order[:3] == ["40", "30", "02"], order
    fake.snap["run"]["restarts"] = 0
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(0.3)
        assert "restart 1" not in screen_text(app)
