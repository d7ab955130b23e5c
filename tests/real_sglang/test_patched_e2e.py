"""End to end: the real patched SGLang (EAGLE-3, tp 1, threshold 2) on this CPU, launched,
steered, verified and stopped through the ``specconsole`` command line (server_control).

The tiny constant models make the mode visible from outside: while speculating every draft
is accepted (accept length 3.00 with 2 steps); target-only decodes 1 token per step (1.00).
The tests run in file order against one server (the order is the scenario):
c=1 speculative -> c=6 target-only (all six end on one step: the batch goes 6 -> 0) ->
15 s idle with the console attached (runtime pending, not failed) -> c=1 speculative ->
threshold 8 -> c=6 speculative -> the cold-draft mark 2, forced target-only (c=4 cold, c=1
warm) -> verify -> [test_console_real.py on the same server,
tests/real_sglang/conftest.py's SHARED_ORDER] -> stop.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from server_control.protocol import decision
from tests.real_sglang.conftest import SKIP_NO_SGLANG, report
from tests.real_sglang.rig import gpu_checks_memory as gm
from tests.real_sglang.rig.server import RigServer, start_ticks, still_alive

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]

SWITCH_RE = re.compile(
    r"Dynamic speculation: switched to target-only \(decode batch (\d+) "
    r"> threshold 2\)"
)
TOKENS_C1 = 31  # 1 from prefill + 10 verify steps of 3
# The idle the console must not call a failure: the runtime layer's grace is 3 s + dwell
# (verify.POLL_MARGIN_S), so a rule that took idle time as evidence (issue 15's bug) fails
# within ~3.5 s; 15 s is over 4 graces and 5 of the quiet poller's 3 s intervals.
IDLE_S = 15.0
TOKENS_C6 = 61  # 60 decode steps: far more than the dwell (4 steps)


def _accept_length(meta: dict) -> float:
    """1 + accepted drafts per verify step (the bonus token is always accepted)."""
    assert meta["spec_verify_ct"] > 0, meta
    return 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"]


def _state(server: RigServer) -> dict:
    states = server.request("/server_info")["internal_states"]
    assert len(states) == 1
    return states[0]


@pytest.fixture
def run(e2e_run):
    """The session's rig-e2e server (tests/real_sglang/conftest.py): this scenario runs
    first on it; test_console_real.py's test comes between its verify and its stop."""
    return e2e_run


def test_configuration_and_initialisation_are_logged(run):
    st = _state(run.server)
    assert st["speculative_disable_batch_threshold"] == 2
    assert "Dynamic speculation disable enabled: threshold=2" in run.server.log_text()


def test_concurrency_1_speculates_with_accept_length_3(run, rig):
    start = len(run.server.log_text())
    out = run.server.generate("the quick brown fox", TOKENS_C1)
    assert out["output_ids"] == [rig.constant_token_id] * TOKENS_C1
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0)
    decodes = run.server.decode_lines(start)
    assert decodes and all(acc == pytest.approx(3.0) for _, acc in decodes), decodes
    assert _state(run.server)["dynamic_speculation"]["mode"] == "speculative"


def test_concurrency_6_switches_to_target_only_with_accept_length_1(run):
    start = len(run.server.log_text())
    t0 = time.monotonic()
    outs = run.server.generate_batch(6, TOKENS_C6)
    report("c=6 x 61 tokens, threshold 2 (target-only)", seconds=time.monotonic() - t0)
    for out in outs:
        assert out["meta_info"]["completion_tokens"] == TOKENS_C6
        # the dwell was served at c=1, so target-only from the first step: no draft accepted
        assert out["meta_info"]["spec_num_correct_drafts"] == 0, out["meta_info"]
    log = run.server.log_text()[start:]
    switch = SWITCH_RE.search(log)
    assert switch and int(switch.group(1)) > 2, log[-2000:]
    # prefill steps decode nothing, so however the six were admitted they decode in lockstep
    # and end on one step: the batch goes 6 -> 0, never through 1 (issue 15)
    assert {n for n, _ in run.server.decode_lines(start)} == {6}
    full_batch = [acc for n, acc in run.server.decode_lines(start) if n == 6]
    assert full_batch and full_batch[-1] == pytest.approx(1.0), full_batch
    assert _state(run.server)["dynamic_speculation"]["mode"] == "target_only"


async def test_idle_after_the_burst_is_pending_then_c1_speculates_and_runtime_passes(run):
    """Issue 15: after the burst the worker rightly stays target-only (no decode step, no
    decision). The console, attached through its Pilot for IDLE_S of that idle, must not call
    it a failure, and `specconsole verify` must say the same; one request at concurrency 1
    brings speculation back and the runtime layer passes."""
    pytest.importorskip("textual", reason="the console needs textual")
    from console.app import SpecConsoleApp
    from server_control.config.profile import load_profile
    from server_control.session.session import Session
    from tests.console.screen_text import screen_text, wait_for

    assert _state(run.server)["dynamic_speculation"]["mode"] == "target_only"
    session = Session.for_profile(load_profile(run.profile), run.state_dir, supervise=False, poll_interval_s=0.25)
    app = SpecConsoleApp(session)

    def runtime(result: dict) -> dict:
        return next(x for x in result["layers"] if x["name"] == "runtime")

    async with app.run_test(size=(160, 40)) as pilot:
        await wait_for(
            pilot,
            lambda: app.snapshot.to_json()["live"]["batch"] == 0 and "TARGET-ONLY" in screen_text(app),
            "the idle target-only server on the screen",
            timeout=120,
        )
        await pilot.pause(IDLE_S)
        layer = runtime(app.snapshot.to_json()["verify"])
        assert layer["status"] == "pending", layer
        assert "idle since the switch; judged at the next decode step" in layer["evidence"]
        assert app.snapshot.to_json()["verify"]["summary"] == "pending"
        assert "TARGET-ONLY \u00b7 idle" in screen_text(app)
        res = run.cli("verify", "--json")
        assert res.returncode == 3, f"{res.stdout}\n{res.stderr}"
        assert runtime(json.loads(res.stdout))["status"] == "pending"

        start = len(run.server.log_text())
        out = await asyncio.to_thread(run.server.generate, "the lazy dog", TOKENS_C1)
        assert _accept_length(out["meta_info"]) == pytest.approx(3.0)
        assert "Dynamic speculation: switched to speculative" in run.server.log_text()[start:]
        assert run.server.decode_lines(start)[-1][1] == pytest.approx(3.0)
        assert _state(run.server)["dynamic_speculation"]["mode"] == "speculative"
        await wait_for(
            pilot, lambda: runtime(app.snapshot.to_json()["verify"])["status"] == "pass", "runtime to pass", timeout=120
        )
        await wait_for(pilot, lambda: "SPECULATIVE" in screen_text(app), "the SPECULATIVE badge", timeout=120)
        await session.close()


def test_runtime_threshold_8_makes_concurrency_6_speculate(run):
    res = run.cli("threshold", "8", "--json")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert _state(run.server)["speculative_disable_batch_threshold"] == 8
    assert "Dynamic speculation: threshold changed 2 -> 8" in run.server.log_text()
    start = len(run.server.log_text())
    t0 = time.monotonic()
    outs = run.server.generate_batch(6, TOKENS_C1)
    report("c=6 x 31 tokens, threshold 8 (speculative)", seconds=time.monotonic() - t0)
    for out in outs:
        assert _accept_length(out["meta_info"]) == pytest.approx(3.0), out["meta_info"]
    assert "switched to target-only" not in run.server.log_text()[start:]


def _delta(before: dict, after: dict) -> dict:
    """What the switch counted between two reads: target-only steps, cold steps, and the
    target-only steps' target forwards and draft-extends."""
    fwd = lambda s, part: s["forwards"]["target_only"][part]  # noqa: E731
    return {
        "target_only": after["steps"]["target_only"] - before["steps"]["target_only"],
        "cold": after["cold_steps"] - before["cold_steps"],
        "target_forwards": fwd(after, "target_eager") - fwd(before, "target_eager"),
        "draft_extends": fwd(after, "draft_extend_eager") - fwd(before, "draft_extend_eager"),
    }


def test_cold_draft_above_2_skips_draft_extend_above_it_and_keeps_the_tokens(run, rig):
    """`specconsole setting cold 2` on the real server, forced target-only: a batch of 4 runs
    every step cold (SGLang's own stub: a target forward, no draft-extend), a batch of 1 warm
    (its draft-extend runs); the tokens are the target's either way."""
    res = run.cli("setting", "cold", "2", "--json")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert _state(run.server)[decision.COLD_DRAFT_KEY] == 2
    assert "Dynamic speculation: cold_draft_above changed 0 -> 2" in run.server.log_text()
    try:
        assert run.cli("setting", "force", "target_only").returncode == 0
        before = _state(run.server)[decision.STATE_KEY]
        outs = run.server.generate_batch(4, TOKENS_C1)
        middle = _state(run.server)[decision.STATE_KEY]
        one = run.server.generate("the quick brown fox", TOKENS_C1)
        after = _state(run.server)[decision.STATE_KEY]
    finally:
        assert run.cli("setting", "cold", "0").returncode == 0
        assert run.cli("setting", "force", "auto").returncode == 0
    for out in [*outs, one]:
        assert out["output_ids"] == [rig.constant_token_id] * TOKENS_C1
    four, single = _delta(before, middle), _delta(middle, after)
    steps = TOKENS_C1 - 1  # decode steps: the first token comes from the prefill
    assert four == {"target_only": steps, "cold": steps, "target_forwards": steps, "draft_extends": 0}, four
    assert single == {"target_only": steps, "cold": 0, "target_forwards": steps, "draft_extends": steps}, single
    assert after["cold_draft_above"] == 2 and _state(run.server)[decision.STATE_KEY]["cold_draft_above"] == 0


def test_gpu_check_memory_and_forwards_on_the_cpu(run):
    """scripts/gpu-check's memory and graph/eager checks (gpu_checks_memory.py), --device cpu:
    the build measured, the reserve published, every forced target-only step eager."""
    detail, _ = gm.memory_per_rank(run.server, cuda=False)
    assert detail.startswith("1 rank(s), used [")
    prompts = [[1 + i, 2, 3, 4, 5] for i in range(4)]
    detail, figures = gm.forwards_per_bucket(run.server, prompts, cuda=False)
    assert detail == "graphs off: every target-only step eager on 1 rank(s)"
    assert figures["bs4"]["graph"] == [0, 0] and min(figures["bs4"]["eager"]) >= 7, figures


def test_verify_passes_all_three_layers(run):
    res = run.cli("verify", "--json", "--wait", "60")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    result = json.loads(res.stdout)
    assert result["summary"] == "pass"
    assert [(layer["name"], layer["status"]) for layer in result["layers"]] == [
        ("configuration", "pass"),
        ("initialisation", "pass"),
        ("runtime", "pass"),
    ]


def test_stop_leaves_no_process(run):
    identities = {pid: start_ticks(pid) for pid in run.server.processes()}
    assert len(identities) >= 3  # server, scheduler, detokenizer (and the watchdog)
    t0 = time.monotonic()
    res = run.cli("stop", "--json", timeout=120)
    report("specconsole stop", seconds=time.monotonic() - t0)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert run.server.processes() == []
    assert still_alive(identities) == [], "processes of the run still alive"
