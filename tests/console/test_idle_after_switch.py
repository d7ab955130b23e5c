"""Issue 15 on the simulator: the console must not accuse a working switch of a server
that went idle after a burst.

A request at concurrency 1 serves the dwell speculatively. Then one batched /generate of 6
sequences crosses N=2: the simulator admits all six in one prefill step (as SGLang does),
switches to target-only on the first decode step, the six decode in lockstep (one token a
step) and end on the same step: the decode batch goes 6 -> 0 and nothing decodes
afterwards, so nothing can switch back. The console (real app, Pilot, real Session) stays
attached through an idle longer than the runtime layer's grace: runtime pending, not
failed, the badge says the server is idle, and `specconsole verify` (a separate process)
says the same. One more request at concurrency 1 brings speculation back: runtime passes.
"""

from __future__ import annotations

import asyncio
import json
import os
import re

import httpx
import pytest

from console.app import SpecConsoleApp
from server_control.session.session import Session
from tests.console.screen_text import screen_text, wait_for
from tests.support import command_forkserver
from tests.support.sim import REPO_ROOT, start_sim

pytestmark = pytest.mark.timeout(180)
IDLE_S = 6.0  # longer than the runtime grace (3 s + 10 dwell steps x 0.1 s)
IDLE_EVIDENCE = "idle since the switch; judged at the next decode step"


@pytest.fixture
def sim(tmp_path):
    handle = start_sim(tmp_path, "--decode-log-interval", "1", tp=1, threshold=2, time_scale=1.0, lifetime=170)
    try:
        yield handle.wait_ready()
    finally:
        handle.stop()


def generate(url: str, text, max_new_tokens: int):
    body = {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens}}
    resp = httpx.post(url + "/generate", json=body, timeout=60)
    resp.raise_for_status()
    return resp.json()


def decode_batches(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"Decode batch, #running-req: (\d+)", log)]


def runtime(result: dict) -> dict:
    return next(x for x in result["layers"] if x["name"] == "runtime")


def verify_command(url: str, log_path) -> tuple[int, dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    res = command_forkserver.run(["verify", "--url", url, "--log", str(log_path), "--json"], env=env, cwd=REPO_ROOT, timeout=60)
    return res.returncode, json.loads(res.stdout)


async def test_idle_after_a_batched_burst_is_pending_then_passes(sim):
    generate(sim.url, "serve the dwell at concurrency 1", 60)  # ~21 speculative steps > dwell 10
    app = SpecConsoleApp(Session.attach(sim.url, log_path=sim.log_path, poll_interval_s=0.25))
    async with app.run_test(size=(160, 40)) as pilot:

        def text() -> str:
            return screen_text(app)

        await wait_for(pilot, lambda: "N=2" in text() and "SPECULATIVE" in text(), "N=2, SPECULATIVE")
        start = len(sim.log_text())
        outs = await asyncio.to_thread(generate, sim.url, ["one batched request"] * 6, 40)
        assert [o["meta_info"]["completion_tokens"] for o in outs] == [40] * 6
        burst = sim.log_text()[start:]
        assert "Prefill batch, #new-seq: 6," in burst, burst[:2000]
        assert "switched to target-only (decode batch 6 > threshold 2)" in burst
        assert set(decode_batches(burst)) == {6}, decode_batches(burst)  # 6 -> 0: never 1..5
        await wait_for(
            pilot,
            lambda: app.snapshot.to_json()["live"]["batch"] == 0 and app.snapshot.to_json()["spec"]["mode"] == "target_only",
            "the console to see the idle target-only server",
        )
        await pilot.pause(IDLE_S)

        layer = runtime(app.snapshot.to_json()["verify"])
        assert layer["status"] == "pending", layer
        assert IDLE_EVIDENCE in layer["evidence"]
        assert app.snapshot.to_json()["verify"]["summary"] != "fail"
        assert "TARGET-ONLY \u00b7 idle" in text()
        code, by_command = verify_command(sim.url, sim.log_path)
        assert code == 3 and runtime(by_command)["status"] == "pending", by_command
        assert IDLE_EVIDENCE in runtime(by_command)["evidence"]

        start = len(sim.log_text())
        await asyncio.to_thread(generate, sim.url, "one more at concurrency 1", 40)
        assert "switched to speculative (decode batch 1 <= 1, threshold 2)" in sim.log_text()[start:]
        await wait_for(pilot, lambda: runtime(app.snapshot.to_json()["verify"])["status"] == "pass", "runtime to pass")
        assert "back to speculative" in runtime(app.snapshot.to_json()["verify"])["evidence"]
        await wait_for(pilot, lambda: "SPECULATIVE \u00b7 idle" in text(), "the idle SPECULATIVE badge")
        await app.session.close()
