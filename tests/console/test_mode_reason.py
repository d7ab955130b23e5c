"""Why the server is in its mode (issue 23 item 7): the sentence from the patch's own rule
(target-only above N, back at the low mark, the dwell), and the line under the status bar.
The rule is checked against the real decision (protocol/decision.py) on both sides of the band."""

from __future__ import annotations

from server_control.model.mode_reason import mode_reason
from server_control.model.snapshot import SpecStatus
from server_control.protocol.decision import SPECULATIVE, TARGET_ONLY, SpecSwitch
from tests.console.screen_text import screen_text


def spec(**kw):
    base = dict(mode="target_only", threshold=5, low_mark=4, hysteresis=1, min_dwell_steps=10, force="auto")
    base.update(kw)
    return SpecStatus(**base)


def test_the_sentences():
    assert mode_reason(spec(), 9) == ("target-only: batch 9 > N=5; back to speculative at <= 4 (after >= 10 steps in a mode)")
    assert mode_reason(spec(min_dwell_steps=0), 5) == "target-only: batch 5 <= N=5; back to speculative at <= 4"
    assert mode_reason(spec(min_dwell_steps=0), 3).startswith("target-only: batch 3 <= 4: back to speculative")
    assert mode_reason(spec(mode="speculative", min_dwell_steps=0), 3) == "speculative: batch 3 <= N=5; target-only above 5"
    assert mode_reason(spec(mode="speculative", min_dwell_steps=0), 8).startswith("speculative: batch 8 > N=5")
    assert mode_reason(spec(force="target_only"), 1) == "target-only: forced (F cycles back to auto)"
    assert mode_reason(spec(threshold=0, mode="speculative"), 30) == "speculative: N=0, speculation is never turned off"
    assert mode_reason(spec(mode=None), 3) == ""


def test_the_band_is_the_rule_the_patch_runs():
    """What the sentence says happens at the next step is what the real decision does."""
    for hysteresis in (0, 1, 3):
        for batch in range(1, 12):
            for mode in (SPECULATIVE, TARGET_ONLY):
                d = SpecSwitch(threshold=5, hysteresis=hysteresis, min_dwell_steps=0)
                d.mode = mode
                said = mode_reason(spec(mode=mode, hysteresis=hysteresis, low_mark=d.low_mark, min_dwell_steps=0), batch)
                d.decide(batch)
                switches = "at the next step" in said
                assert switches == (d.mode != mode), (said, d.mode)


async def test_the_line_under_the_status_bar(make_app):
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.3)
        assert "why: target-only: batch 7 > N=5; back to speculative at <= 4" in screen_text(app)
