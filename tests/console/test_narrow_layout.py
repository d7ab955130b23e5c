"""Readability at 80x24: what the operator sees in a small terminal is complete."""
from __future__ import annotations

from console.widgets.live_panel import batch_chart


def test_short_chart_still_labels_n():
    # 3 chart rows (the 80x24 layout): N=5 falls on the top row; its label must show.
    rows = [r.plain for r in batch_chart([1, 2, 3], 5, 20, 3)]
    assert any(r.startswith("N=5") for r in rows), rows
    assert sum("\u254c" in r for r in rows) == 1
