"""Ranks never diverge and never hang, on the tp 2 CPU rig with a real gloo barrier inside
the steps=0 build (``SPECCONSOLE_RIG_TP_FAULTS=barrier``, as each CUDA-graph capture of
the build does on a GPU; tests/real_sglang/rig/tp_faults.py):

TP1 refuses for a rank-local reason: the ranks agree BEFORE the build, no rank builds,
TP0 logs the NOT active line naming TP1 (TP1 logged its own reason at its set-up), and the
server serves speculating. The old order's hang and a build failing after the agreement:
test_patched_tp2_build_order.py.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG, cli_server
from tests.real_sglang.rig.tp_faults import REFUSED

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
REASON = f"TP ranks disagree: TP1: {REFUSED}; ready: TP0; the switch is off on every rank"
ENTERED = "rig tp_faults: build barrier entered"


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    with cli_server(
        rig,
        tmp_path_factory.mktemp("tp2refuse"),
        "tp 2, TP1 refuses, a barrier in the build, via specconsole launch",
        ready_timeout_s=150,
        tp=2,
        threshold=2,
        name="rig-tp2-disagree",
        env={"SPECCONSOLE_RIG_TP_FAULTS": "barrier,refuse=1"},
    ) as run:
        yield run


def _lines(text: str, needle: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M):
        if needle in m.group(2):
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def test_both_ranks_turn_off_together_one_line_each_naming_tp1(run):
    log = run.server.log_text()
    assert _lines(log, "NOT active") == {  # TP1 said why at its set-up; TP0 names TP1
        "TP0": ["Dynamic speculation disable NOT active: " + REASON],
        "TP1": ["Dynamic speculation disable NOT active: " + REFUSED],
    }
    assert not _lines(log, "Dynamic speculation disable enabled")
    assert not _lines(log, ENTERED)  # agreed before the build: no rank built


def test_server_info_shows_every_rank(run):
    (state,) = run.server.request("/server_info")["internal_states"]
    live = state["dynamic_speculation"]
    assert live["active"] is False and live["reason"] == REASON
    ranks = live["tp_ranks"]
    assert [(r["rank"], r["active"], r["reason"]) for r in ranks] == [(0, True, None), (1, False, REFUSED)]
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
    assert run.server.request("/set_internal_state", {"server_args": {"speculative_disable_batch_threshold": 8}}) == [False]
    deadline = time.monotonic() + 20  # TP0 answers; TP1's line may reach the log after
    while True:
        refused = _lines(run.server.log_text(), "refused speculative_disable_batch_threshold=8")
        if set(refused) == {"TP0", "TP1"} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(refused) == {"TP0", "TP1"}, run.server.log_tail(60)
