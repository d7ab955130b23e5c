"""The console (Textual Pilot) on the real patched SGLang server: a key press moves the
server's threshold and the mode badge follows what the server actually does.

Runs on test_patched_e2e.py's server (launched with N=2; tests/real_sglang/conftest.py),
N set to 6 through ``specconsole threshold`` first. Batches of six requests, one after
another until the test ends, keep the decode batch at 6. Threshold 6: speculative. ``-`` -> N=5:
6 > 5, the server switches to target-only. ``+`` ``+`` -> N=7: 6 <= 7 - 1 (hysteresis 1),
back to speculative. The console learns each mode from the server (HTTP + log), not from
the key.
"""

from __future__ import annotations

import threading

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG
from tests.real_sglang.rig import reuse

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
textual = pytest.importorskip("textual", reason="the console needs textual")

from console.app import SpecConsoleApp  # noqa: E402
from server_control.config.profile import load_profile  # noqa: E402
from server_control.session.session import Session  # noqa: E402
from tests.console.screen_text import screen_text  # noqa: E402
from tests.console.screen_text import wait_for as wait_on_screen  # noqa: E402

LOAD_TOKENS = 500  # 6 x ~510 tokens fit the 4096-token KV pool


@pytest.fixture
def served(e2e_run):
    """The session's rig-e2e server (``specconsole launch``, tests/real_sglang/conftest.py),
    after test_patched_e2e.py's scenario and before its stop: N=6 set as an operator does
    (``specconsole threshold 6``), the mode back to speculative (rig/reuse.py), then the
    rest of the runtime state checked to be the launch's (hysteresis 1, dwell 4, no forced
    mode, speculative), as on a server launched with N=6."""
    res = e2e_run.cli("threshold", "6", "--json")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    reuse.back_to_speculative(e2e_run.server)  # e2e's last check left it forced target-only, then auto
    (state,) = e2e_run.server.request("/server_info")["internal_states"]
    live = state["dynamic_speculation"]
    assert state["speculative_disable_batch_threshold"] == 6 and live["threshold"] == 6, state
    got = (live["hysteresis"], live["min_dwell_steps"], live["force"], live["mode"])
    assert got == (1, 4, "auto", "speculative"), got
    return e2e_run


def _mode(run) -> str | None:
    return run.server.request("/server_info")["internal_states"][0]["dynamic_speculation"]["mode"]


async def wait_for(pilot, cond, what: str, timeout: float = 120.0):
    await wait_on_screen(pilot, cond, what, timeout, every=0.2)


async def test_threshold_keys_move_the_real_server_and_the_badge_follows(served):
    errors: list = []
    done = threading.Event()

    def load():
        # one batch of 6 after another until the test is done: a single batch (~170 steps)
        # could end before the key's N reached the server on a loaded machine, and then no
        # batch ever exceeded 5 (a CI run's failure: the batch's last step at 05:25:32.0, N=5
        # applied at 05:25:32.4, the badge never moved)
        while not done.is_set():
            try:
                served.server.generate_batch(6, LOAD_TOKENS)
            except Exception as exc:  # noqa: BLE001 - reported at the end of the test
                errors.append(exc)
                return

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    session = Session.for_profile(load_profile(served.profile), served.state_dir, supervise=False, poll_interval_s=0.25)
    app = SpecConsoleApp(session)
    async with app.run_test(size=(160, 40)) as pilot:
        text = lambda: screen_text(app)  # noqa: E731
        await wait_for(pilot, lambda: "N=6" in text() and "SPECULATIVE" in text(), "N=6 and the SPECULATIVE badge")
        await wait_for(
            pilot, lambda: served.server.decode_lines()[-1:] and served.server.decode_lines()[-1][0] == 6, "a decode batch of 6"
        )
        await pilot.press("minus")
        await wait_for(pilot, lambda: "N=5 applied" in text(), "N=5 applied")
        await wait_for(pilot, lambda: "TARGET-ONLY" in text(), "the TARGET-ONLY badge")
        assert _mode(served) == "target_only"
        assert "switched to target-only (decode batch 6 > threshold 5)" in served.server.log_text()
        await pilot.press("plus")
        await pilot.press("plus")
        await wait_for(pilot, lambda: "N=7 applied" in text(), "N=7 applied")
        await wait_for(pilot, lambda: "SPECULATIVE" in text() and "TARGET-ONLY" not in text(), "the badge back to SPECULATIVE")
        assert _mode(served) == "speculative"
        assert served.server.request("/server_info")["internal_states"][0]["speculative_disable_batch_threshold"] == 7
        await app.session.close()
    done.set()
    loader.join(timeout=300)
    assert not loader.is_alive(), "the load's last batch did not end"
    assert not errors, errors
