"""End to end: the real patched SGLang (EAGLE-3, tp 1, threshold 2) on this CPU, launched,
steered, verified and stopped through the ``specconsole`` command line (server_control).

The tiny constant models make the mode visible from outside: while speculating every draft
is accepted (accept length 3.00 with 2 steps); target-only decodes 1 token per step (1.00).
The tests run in file order against one server (the order is the scenario):
c=1 speculative -> c=6 target-only -> c=1 speculative -> threshold 8 -> c=6 speculative ->
verify -> stop.
"""
from __future__ import annotations

import json
import re
import time

import pytest

from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.profiles import CliRun
from tests.real_sglang.rig.server import RigServer, rss_mb, start_ticks, still_alive

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]

SWITCH_RE = re.compile(r"Dynamic speculation: switched to target-only \(decode batch (\d+) "
                       r"> threshold 2\)")
TOKENS_C1 = 31   # 1 from prefill + 10 verify steps of 3
TOKENS_C6 = 61   # 60 decode steps: far more than the dwell (4 steps)


def _accept_length(meta: dict) -> float:
    """1 + accepted drafts per verify step (the bonus token is always accepted)."""
    assert meta["spec_verify_ct"] > 0, meta
    return 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"]


def _state(server: RigServer) -> dict:
    states = server.request("/server_info")["internal_states"]
    assert len(states) == 1
    return states[0]


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    t0 = time.monotonic()
    run = CliRun(rig, tmp_path_factory.mktemp("patched"), threshold=2,
                 lifetime_s=SERVER_LIFETIME_S)
    try:
        run.server.wait_ready(timeout_s=120)
        pids = run.server.processes()
        rss = rss_mb(pids)
        report("patched server via specconsole launch", ready_s=time.monotonic() - t0,
               processes=len(pids), rss_total_mb=sum(rss.values()), rss_max_mb=max(rss.values()))
        yield run
    finally:
        left = run.close()
        assert left == [], f"processes left: {left}"


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
    full_batch = [acc for n, acc in run.server.decode_lines(start) if n == 6]
    assert full_batch and full_batch[-1] == pytest.approx(1.0), full_batch
    assert _state(run.server)["dynamic_speculation"]["mode"] == "target_only"


def test_back_to_concurrency_1_speculates_again(run):
    start = len(run.server.log_text())
    out = run.server.generate("the lazy dog", TOKENS_C1)
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0)
    assert "Dynamic speculation: switched to speculative" in run.server.log_text()[start:]
    assert run.server.decode_lines(start)[-1][1] == pytest.approx(3.0)
    assert _state(run.server)["dynamic_speculation"]["mode"] == "speculative"


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


def test_verify_passes_all_three_layers(run):
    res = run.cli("verify", "--json", "--wait", "60")
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    result = json.loads(res.stdout)
    assert result["summary"] == "pass"
    assert [(layer["name"], layer["status"]) for layer in result["layers"]] == [
        ("configuration", "pass"), ("initialisation", "pass"), ("runtime", "pass")]


def test_stop_leaves_no_process(run):
    identities = {pid: start_ticks(pid) for pid in run.server.processes()}
    assert len(identities) >= 3  # server, scheduler, detokenizer (and the watchdog)
    t0 = time.monotonic()
    res = run.cli("stop", "--json", timeout=120)
    report("specconsole stop", seconds=time.monotonic() - t0)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert run.server.processes() == []
    assert still_alive(identities) == [], "processes of the run still alive"
