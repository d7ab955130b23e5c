"""Hysteresis and minimum dwell changed at runtime on the real simulator: validated first,
then read back on every rank (the flapping suggestion of the console applies them)."""

from __future__ import annotations

from server_control.control.settings import Control
from server_control.protocol import decision
from server_control.protocol.runtime_settings import DWELL, HYSTERESIS
from tests.support.sim import start_sim


async def test_hysteresis_and_dwell_applied_and_read_back(tmp_path):
    with start_sim(tmp_path, tp=2, threshold=5) as sim:
        sim.wait_ready()
        control = Control(sim.url)
        try:
            hyst = await control.set_setting(HYSTERESIS.key, 3)
            dwell = await control.set_setting(DWELL.key, 40)
            states = await control.internal_states()
            refused = [await control.set_setting(HYSTERESIS.key, -1), await control.set_setting(DWELL.key, "many")]
        finally:
            await control.aclose()
        log = sim.wait_for_log("min_dwell_steps changed")
    assert hyst.state == "applied" and decision.HYSTERESIS_KEY in hyst.detail, hyst
    assert dwell.state == "applied" and "=40" in dwell.detail, dwell
    assert [s[decision.HYSTERESIS_KEY] for s in states] == [3] and [s[decision.DWELL_KEY] for s in states] == [40]
    assert [s[decision.STATE_KEY]["low_mark"] for s in states] == [2]  # resume at <= max(1, 5 - 3)
    assert "hysteresis changed" in log
    assert [r.state for r in refused] == ["refused", "refused"], refused
