"""Snapshot tests of the main screen (pytest-textual-snapshot) with deterministic data:
the fixed fake snapshot and log lines, no clocks, no cursor (the log view has focus).
Update after an intended change: pytest tests/console/test_snapshots.py --snapshot-update"""

from __future__ import annotations

import pytest

from console.app import SpecConsoleApp
from tests.console.fakes import FakeSession


@pytest.mark.parametrize("size", [(80, 24), (200, 60)], ids=["80x24", "200x60"])
def test_main_screen(snap_compare, size):
    app = SpecConsoleApp(FakeSession())

    async def settle(pilot):
        await pilot.pause(0.2)
        app.log_view.flush()
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_help_screen(snap_compare):
    app = SpecConsoleApp(FakeSession())
    assert snap_compare(app, terminal_size=(100, 40), press=["question_mark"])
