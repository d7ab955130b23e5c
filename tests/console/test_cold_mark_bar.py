"""The status bar says the cold-draft mark where one is set (target-only steps above it skip
the draft's extend) and how many steps ran cold; at 0 (the draft kept warm) it says nothing."""

from __future__ import annotations

from dataclasses import replace

from console.widgets.status_bar import threshold_text
from server_control.model.snapshot import SessionSnapshot, SpecStatus
from tests.console.fakes import sample_snapshot


def _bar(**spec) -> str:
    snap = SessionSnapshot.from_json(sample_snapshot())
    return threshold_text(replace(snap, spec=SpecStatus(threshold=14, low_mark=13, **spec))).plain


def test_the_bar_says_the_cold_mark_and_its_cold_steps():
    assert _bar(cold_draft_above=14, cold_steps=0).endswith(" draft cold >14")
    assert _bar(cold_draft_above=14, cold_steps=37).endswith(" draft cold >14 (37 cold)")


def test_a_warm_draft_or_a_server_that_does_not_say_is_not_shown():
    assert "cold" not in _bar(cold_draft_above=0, cold_steps=0)
    assert "cold" not in _bar()
