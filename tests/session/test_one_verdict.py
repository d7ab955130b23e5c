"""One verdict for one server (issue 15): the screen and `specconsole verify` judge the same
evidence through the same code path.

One sample sequence is fed to the session the screen is built on (`specconsole attach URL`,
rendered by the real app under Pilot) and to the session `specconsole verify --url URL`
opens; after every sample both say the same thing. The sequence is the issue's story:
load above N, the switch, the batch 6 -> 0, a long idle (pending on both), then a trickle
at batch 1 that never brings speculation back (fail on both, at the same sample).
"""

from __future__ import annotations

import time

from console.app import SpecConsoleApp
from console.cli import build_parser, ui
from console.cli.common import open_session
from server_control.model.load import Load
from server_control.protocol import decision
from server_control.telemetry.sample import sample_from_server_info
from tests.console.screen_text import screen_text

URL = "http://127.0.0.1:9"  # never contacted: neither session is started, the test feeds them
DOWN = {"to": "target_only", "batch": 8, "threshold": 5, "step": 40}


def sample(ts: float, batch: int, mode: str, switches: int):
    state = {
        decision.THRESHOLD_KEY: 5,
        decision.HYSTERESIS_KEY: 1,
        decision.DWELL_KEY: 10,
        decision.FORCE_KEY: "auto",
        decision.STATE_KEY: {"mode": mode, "switch_count": switches, "low_mark": 4, "last_switch": DOWN if switches else None},
    }
    s = sample_from_server_info(ts, {"tp_size": 1, "dp_size": 1, decision.THRESHOLD_KEY: 5, "internal_states": [state]})
    s.load = Load(batch=batch, queue=0, source="loads")
    return s


def sequence(t0: float) -> list:
    """One poll a second, timed around the wall clock's now as the pollers write them."""
    seq = [sample(t0 + i, 8, decision.SPECULATIVE, 0) for i in range(3)]
    seq += [sample(t0 + 3 + i, 6, decision.TARGET_ONLY, 1) for i in range(2)]
    seq += [sample(t0 + 5 + i, 0, decision.TARGET_ONLY, 1) for i in range(45)]  # 6 -> 0, idle
    seq += [sample(t0 + 50 + i, 1, decision.TARGET_ONLY, 1) for i in range(8)]  # batch 1, no switch back
    return seq


def screen_session(monkeypatch):
    """The session `specconsole attach URL` puts on the screen (and the app's options)."""
    built = {}

    def capture(session, args, **kwargs):
        built.update(session=session, kwargs=kwargs)
        return 0

    monkeypatch.setattr(ui, "_run_app", capture)
    args = build_parser().parse_args(["attach", URL])
    assert args.func(args) == 0
    return built["session"], built["kwargs"]


async def test_screen_and_verify_command_give_one_verdict(monkeypatch):
    session, kwargs = screen_session(monkeypatch)
    cli = open_session(build_parser().parse_args(["verify", "--url", URL]))
    app = SpecConsoleApp(session, **kwargs, start_session=False)
    verdicts = []
    async with app.run_test(size=(160, 40)) as pilot:
        for s in sequence(time.time() - 8):
            session.poller.on_sample(s)  # what the screen's poller hands its session
            cli.poller.on_sample(s)  # what the command's poller hands its session
            # the screen builds its snapshot at most every 0.25 s (SNAPSHOT_EVERY_S): wait (bounded)
            # until its snapshot holds this poll, however loaded the machine is
            deadline = time.monotonic() + 10
            while app.snapshot.live.ts != s.ts and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.snapshot.live.ts == s.ts, "the screen never took in the poll"
            on_screen = app.snapshot.verify
            by_command = (await cli.verify()).verification
            assert on_screen.layers[2] == by_command.layers[2], f"batch {s.load.batch}"
            assert on_screen == by_command
            assert "verify " in screen_text(app) and f" {by_command.summary}" in screen_text(app)
            verdicts.append(by_command.layers[2].status)
    # the story was judged, not just echoed: pending through the idle, fail on the trickle
    assert verdicts[5:50] == ["pending"] * 45
    assert verdicts[-1] == "fail" and "pending" in verdicts[50:]
