"""Ranks never diverge, on the tp 2 CPU rig: TP1's steps=0 build is forced to fail
(``SPECCONSOLE_DYNSPEC_TEST_FAIL_BUILD_RANKS=1``, a test-only variable of the patch). Both
ranks turn the switch off together with the same NOT active line naming TP1 and why; the
server serves correctly (speculating at every batch); /server_info shows every rank."""
from __future__ import annotations

import re

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG, cli_server

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
FAILURE = ("could not build the target-only (steps=0) runtime state: RuntimeError('forced by "
           "SPECCONSOLE_DYNSPEC_TEST_FAIL_BUILD_RANKS (test only)')")
REASON = f"TP ranks disagree: TP1: {FAILURE}; ready: TP0; the switch is off on every rank"


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    with cli_server(rig, tmp_path_factory.mktemp("tp2fail"),
                    "tp 2, TP1 build forced to fail, via specconsole launch",
                    ready_timeout_s=150, tp=2, threshold=2, name="rig-tp2-disagree",
                    env={"SPECCONSOLE_DYNSPEC_TEST_FAIL_BUILD_RANKS": "1"}) as run:
        yield run


def _lines(text: str, needle: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M):
        if needle in m.group(2):
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def test_both_ranks_turn_off_together_with_one_line_naming_tp1(run):
    log = run.server.log_text()
    assert _lines(log, "NOT active") == {
        "TP0": ["Dynamic speculation disable NOT active: " + REASON],
        "TP1": ["Dynamic speculation disable NOT active: " + REASON]}
    assert not _lines(log, "Dynamic speculation disable enabled")
    assert not _lines(log, "target-only runtime state ready")


def test_server_info_shows_every_rank(run):
    (state,) = run.server.request("/server_info")["internal_states"]
    live = state["dynamic_speculation"]
    assert live["active"] is False and live["reason"] == REASON
    assert live["tp_ranks"] == [{"rank": 0, "active": True, "reason": None},
                                {"rank": 1, "active": False, "reason": FAILURE}]
    assert [(r["rank"], r["active"], r["threshold"]) for r in live["ranks"]] == [
        (0, False, 2), (1, False, 2)]


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
    assert refused["TP1"][0].endswith(f"not active on this rank ({REASON})")
