"""The warning for SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND says what it costs, with a number."""

import logging

from server_control.protocol import decision
from server_control.sglang_patch import startup, worker


def _announce(monkeypatch, caplog, value):
    if value is None:
        monkeypatch.delenv("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", raising=False)
    else:
        monkeypatch.setenv("SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND", value)
    dyn = worker.DynamicSpeculation(decision.SpecSwitch(4), None)
    with caplog.at_level(logging.INFO, logger=worker.logger.name):
        startup.announce(dyn)
    return [r for r in caplog.records if r.levelno == logging.WARNING]


def test_the_warning_names_the_kv_holes_and_the_measured_loss(monkeypatch, caplog):
    warnings = _announce(monkeypatch, caplog, "1")
    assert [w.getMessage() for w in warnings] == [startup.SKIP_DRAFT_EXTEND_WARNING]
    text = warnings[0].getMessage()
    assert "hole at every position decoded target-only" in text
    assert "another request's data" in text and "1.00 instead of 3.00" in text


def test_no_warning_without_the_variable(monkeypatch, caplog):
    assert _announce(monkeypatch, caplog, None) == []
