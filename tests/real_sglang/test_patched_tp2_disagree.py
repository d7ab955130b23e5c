"""Ranks never diverge and never hang, on the tp 2 CPU rig with a real gloo barrier inside
the steps=0 build (``SPECCONSOLE_RIG_TP_FAULTS=barrier``, as each CUDA-graph capture of
the build does on a GPU; tests/real_sglang/rig/tp_faults.py):

* TP1 refuses for a rank-local reason: the ranks agree BEFORE the build, no rank builds,
  both log the same NOT active line naming TP1, and the server serves speculating;
* the negative control: the same fault with the old order (build first, then agree):
  TP0 waits in the build's barrier for TP1, which never comes; the server never gets
  ready (bounded: the test gives up after ``HANG_WAIT_S`` and stops it);
* TP1's build fails after the ranks agreed to build: the server stops at once, the
  failure named on both ranks (a rank that fails inside a build may leave the others in
  one of its collectives, so "switch off and serve" is not offered).
"""
from __future__ import annotations

import re
import sys
import time

import pytest

from server_control.ports import free_port
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, cli_server, report
from tests.real_sglang.rig.build import omp_bind, server_args, server_env
from tests.real_sglang.rig.server import RigServer
from tests.real_sglang.rig.tp_faults import REFUSED

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
REASON = f"TP ranks disagree: TP1: {REFUSED}; ready: TP0; the switch is off on every rank"
HANG_WAIT_S = 75  # the old order: TP1 waits 5 s + 30 s for a verdict; give it more than that
ENTERED, LEFT = "rig tp_faults: build barrier entered", "rig tp_faults: build barrier left"


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    with cli_server(rig, tmp_path_factory.mktemp("tp2refuse"),
                    "tp 2, TP1 refuses, a barrier in the build, via specconsole launch",
                    ready_timeout_s=150, tp=2, threshold=2, name="rig-tp2-disagree",
                    env={"SPECCONSOLE_RIG_TP_FAULTS": "barrier,refuse=1"}) as run:
        yield run


def _lines(text: str, needle: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M):
        if needle in m.group(2):
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def _start(rig, work, faults: str) -> RigServer:
    port = free_port()
    env = server_env(rig)
    env.update({"SPECCONSOLE_RIG_TP_FAULTS": faults, "SPECCONSOLE_DYNSPEC_AGREE_TIMEOUT_S": "5",
                "SGLANG_CPU_OMP_THREADS_BIND": omp_bind(2)})
    args = server_args(rig, port, tp=2, extra=["--speculative-disable-batch-threshold", "2"])
    return RigServer.start([sys.executable, "-m", "server_control.sglang_patch.serve", *args],
                           env, work / "server.log", port, lifetime_s=SERVER_LIFETIME_S)


def test_both_ranks_turn_off_together_with_one_line_naming_tp1(run):
    log = run.server.log_text()
    assert _lines(log, "NOT active") == {
        "TP0": ["Dynamic speculation disable NOT active: " + REASON],
        "TP1": ["Dynamic speculation disable NOT active: " + REASON]}
    assert not _lines(log, "Dynamic speculation disable enabled")
    assert not _lines(log, ENTERED)  # agreed before the build: no rank built


def test_server_info_shows_every_rank(run):
    (state,) = run.server.request("/server_info")["internal_states"]
    live = state["dynamic_speculation"]
    assert live["active"] is False and live["reason"] == REASON
    ranks = live["tp_ranks"]
    assert [(r["rank"], r["active"], r["reason"]) for r in ranks] == [
        (0, True, None), (1, False, REFUSED)]
    assert all(r["memory"]["free_gib"] > 0 for r in ranks)  # each rank's free memory


def test_it_serves_correctly_speculating_at_every_batch(run):
    start = len(run.server.log_text())
    out = run.server.generate("the quick brown fox", 31)["meta_info"]
    assert 1 + out["spec_num_correct_drafts"] / out["spec_verify_ct"] == pytest.approx(3.0)
    for out in run.server.generate_batch(6, 31):  # above N=2: no switch, no hang
        meta = out["meta_info"]
        assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)
    assert "switched to" not in run.server.log_text()[start:]


def test_a_runtime_change_is_refused_on_both_ranks(run):
    assert run.server.request("/set_internal_state", {
        "server_args": {"speculative_disable_batch_threshold": 8}}) == [False]
    refused = _lines(run.server.log_text(), "refused speculative_disable_batch_threshold=8")
    assert set(refused) == {"TP0", "TP1"}


def test_negative_control_the_old_order_hangs_the_group(rig, tmp_path):
    """Build first, then agree: TP0 enters the build's barrier, TP1 (refused) never does."""
    server = _start(rig, tmp_path, "barrier,refuse=1,old_order")
    try:
        deadline = time.monotonic() + HANG_WAIT_S
        with pytest.raises(TimeoutError):
            server.wait_ready(timeout_s=HANG_WAIT_S)
        assert time.monotonic() >= deadline - 1
        log = server.log_text()
        assert set(_lines(log, ENTERED)) == {"TP0"} and not _lines(log, LEFT)
        assert server.processes(), "the hung server should still be there (it hangs, not exits)"
        report("tp 2 old order, TP1 skips the build: still not ready", seconds=HANG_WAIT_S)
    finally:
        assert server.stop(grace_s=5) == []


def test_a_build_failing_after_the_agreement_stops_the_server_naming_it(rig, tmp_path):
    server = _start(rig, tmp_path, "barrier,fail_build=1")
    t0 = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="exited"):
            server.wait_ready(timeout_s=300)
        log = server.log_text()
        failure = ("the target-only (steps=0) build failed after every TP rank agreed to "
                   "build (TP1: could not build the target-only (steps=0) runtime state: "
                   "RuntimeError('forced by rig tp_faults fail_build (test only)'))")
        assert set(_lines(log, ENTERED)) == {"TP0", "TP1"} == set(_lines(log, LEFT))
        assert set(_lines(log, failure)) == {"TP0", "TP1"}  # the reason on every rank
        assert "The server is fired up" not in log
        report("tp 2, TP1's build fails after the agreement: server gone",
               seconds=time.monotonic() - t0)
    finally:
        assert server.stop(grace_s=5) == []
