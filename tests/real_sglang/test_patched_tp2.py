"""Tensor parallel 2 on the CPU (gloo): both ranks load the patch, agree, switch together,
and every rank is read back (``/server_info`` gathers both ranks' live values; the
patch's metrics carry each rank's ``tp_rank``).

Same launch path as test_patched_e2e.py (``specconsole launch`` on a rig profile), with
``tp_size = 2``, ``--enable-metrics`` and ``--speculative-disable-auto-tune 1-8``. Every
rank writes its own log lines with its ``TPr`` prefix.

The in-server tuner runs first (the tests run in file order on one server): with
exploration 0.1 set at runtime (so both modes' curves exist near N), under traffic
spanning N, TP0 moves N from its own cost curves and the move rides SGLang's request
broadcast: both ranks log it and read back the same threshold in ``/server_info``; an
operator's N turns tuning off on both ranks. On this rig speculation wins at every batch
(docs/cpu-rig.md, ``mode_cost``), so the tuner moves N up from 2 (``speculation faster at
every measured batch``). Then N goes back to 2 and exploration to 0 (checked on both
ranks), and the rest runs with tuning off, as on a server launched without it.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request

import pytest

from server_control.protocol import cost_curves, crossover
from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.profiles import CliRun, specconsole
from tests.real_sglang.rig.server import rss_mb

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
TOKENS = 31
TUNE_TOKENS = 24
MOVE = "Dynamic speculation: threshold 2 -> "
THRESHOLD, SHARE, DWELL = (
    "speculative_disable_batch_threshold",
    "speculative_disable_explore_share",
    "speculative_disable_min_dwell_steps",
)


def _ranks(text: str, needle: str) -> set[str]:
    """The TP ranks (e.g. {'TP0', 'TP1'}) that logged a line containing ``needle``."""
    return {m.group(1) for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M) if needle in m.group(2)}


@pytest.fixture(scope="module")
def tp2(rig, tmp_path_factory):
    t0 = time.monotonic()
    run = CliRun(
        rig,
        tmp_path_factory.mktemp("tp2"),
        tp=2,
        threshold=2,
        lifetime_s=SERVER_LIFETIME_S,
        name="rig-tp2",
        extra_args=("--enable-metrics", "--speculative-disable-auto-tune", "1-8"),
    )
    try:
        run.server.wait_ready(timeout_s=120)
        rss = rss_mb(run.server.processes())
        report(
            "tp 2 server via specconsole launch",
            ready_s=time.monotonic() - t0,
            processes=len(rss),
            rss_total_mb=sum(rss.values()),
        )
        yield run.server, run.profile, run.state_dir
    finally:
        assert run.close() == []


def _live(server) -> dict:
    (state,) = server.request("/server_info")["internal_states"]
    return state["dynamic_speculation"]


def _why_no_move(live: dict) -> str:
    """The tuner's state and the estimate from the whole run's curves (the tuner reads the
    last 30 s only), for a failure message."""
    e = crossover.estimate(cost_curves.parse(live[cost_curves.SNAPSHOT_KEY]))
    points = [(p.mode, p.lo, p.hi, p.steps, round(p.tok_s)) for p in e.points]
    return (
        f"auto_tune={json.dumps(live['auto_tune'])}\nthreshold={live['threshold']} whole-run estimate: "
        f"verdict={e.verdict} crossover={e.crossover} suggested={e.suggested} interval={e.interval} "
        f"extrapolated={e.extrapolated} missing={e.missing}\npoints={points}"
    )


def test_tp0_moves_n_and_both_ranks_apply_it(tp2):
    t0 = time.monotonic()
    server, _, _ = tp2
    assert _ranks(server.log_text(), "Dynamic speculation: auto-tune on, N within 1-8") == {"TP0", "TP1"}
    assert _live(server)["auto_tune"]["moves"] == 0
    assert server.request("/set_internal_state", {"server_args": {SHARE: 0.1}}) == [True]
    traffic_t0, batches, live = time.monotonic(), 0, _live(server)
    while live["auto_tune"]["moves"] == 0 and time.monotonic() - traffic_t0 < 420:
        for n in (1, 2, 3, 4, 5, 6):
            server.generate_batch(n, TUNE_TOKENS)
            batches += 1
        live = _live(server)
    traffic_s = time.monotonic() - traffic_t0
    report("tp 2 auto-tune: traffic until the first move", seconds=traffic_s, batches=batches)
    assert live["auto_tune"]["moves"] >= 1, f"{_why_no_move(live)}\n{server.log_tail()}"
    move = live["auto_tune"]["last_move"]  # under load a second move may follow the first
    assert move["new"] > move["old"] >= 2, move
    log = server.log_text()
    first = re.search(rf"^\[[^\]]* TP0\] {re.escape(MOVE)}(\d+) \(auto: ", log, re.M)
    assert first is not None and int(first.group(1)) > 2, server.log_tail()
    assert _ranks(log, f"{MOVE}{first.group(1)} (auto: ") == {"TP0", "TP1"}, server.log_tail()
    assert _ranks(log, f"threshold {move['old']} -> {move['new']} (auto: ") == {"TP0", "TP1"}, server.log_tail()
    # both ranks read back the same threshold (the rows are gathered anew after a move)
    rows = live["ranks"]
    assert [r["threshold"] for r in rows] == [live["threshold"]] * 2 and live["threshold"] >= move["new"]
    assert live["active"] is True and "disagree" not in log
    # the operator's N wins on both ranks (1: below any move up from 2)
    assert server.request("/set_internal_state", {"server_args": {THRESHOLD: 1}}) == [True]
    after = _live(server)
    assert after["auto_tune"]["on"] is False and after["auto_tune"]["off_reason"] == "threshold set to 1 by the operator"
    assert [r["threshold"] for r in after["ranks"]] == [1, 1]
    assert [r["auto_tune"]["on"] for r in after["ranks"]] == [False, False]
    off = "Dynamic speculation: auto-tune off (threshold set to 1 by the operator)"
    assert _ranks(server.log_text(), off) == {"TP0", "TP1"}
    server.generate_batch(4, TUNE_TOKENS)
    time.sleep(2)
    assert _live(server)["threshold"] == 1  # no move after it
    report("tp 2 auto-tune test", wall_s=time.monotonic() - t0)


def test_after_tuning_the_launch_settings_are_back_on_both_ranks(tp2):
    """N 2 and exploration 0 again, the mode speculative, tuning off: the rest of the
    module runs as on a server launched with N=2 and no tuner."""
    server, _, _ = tp2
    assert server.request("/set_internal_state", {"server_args": {THRESHOLD: 2, SHARE: 0}}) == [True]
    server.generate("the quick brown fox", 8)  # c=1: back to speculative at N=2
    live = _live(server)
    rows = [(r["threshold"], r["exploration"]["share"], r["auto_tune"]["on"], r["mode"]) for r in live["ranks"]]
    assert rows == [(2, 0.0, False, "speculative")] * 2, live["ranks"]


def test_both_ranks_log_the_init_line(tp2):
    server, _, _ = tp2
    assert _ranks(server.log_text(), "Dynamic speculation disable enabled: threshold=2") == {"TP0", "TP1"}


def test_both_ranks_take_the_reserve_they_agreed_on(tp2):
    """Before its KV pool existed each rank reported its reserve through the world's
    store and took it only because the other reported the same (reserve_agreement.py)."""
    server, _, _ = tp2
    taken = "GiB taken out of the KV cache budget for the target-only (steps=0) state (estimate, the same on all 2 ranks)"
    assert _ranks(server.log_text(), taken) == {"TP0", "TP1"}, server.log_tail()


def test_every_rank_is_read_back(tp2):
    server, _, _ = tp2
    (state,) = server.request("/server_info")["internal_states"]  # one entry: TP0's
    live = state["dynamic_speculation"]
    assert live["active"] is True and live["reason"] is None
    assert [{k: r[k] for k in ("rank", "active", "reason")} for r in live["tp_ranks"]] == [
        {"rank": 0, "active": True, "reason": None},
        {"rank": 1, "active": True, "reason": None},
    ]
    # each rank's free (host) memory and estimate, reported before the build ...
    assert all(r["memory"]["free_gib"] > 0 and r["memory"]["estimate_gib"] >= 0 for r in live["tp_ranks"])
    # ... and, per rank after it, what the steps=0 state took, and the forwards per mode
    for row in live["ranks"]:
        assert set(row["state_memory"]) == {"free_gib", "estimate_gib", "reserved_gib", "used_gib"}
        assert set(row["forwards"]) == {"speculative", "target_only"}
    assert live["limits"] == {"max_running_requests": 48, "cuda_graph_max_bs": None}
    assert [(r["rank"], r["active"], r["threshold"], r["mode"]) for r in live["ranks"]] == [
        (0, True, 2, "speculative"),
        (1, True, 2, "speculative"),
    ]
    t0 = time.monotonic()
    for _ in range(20):
        server.request("/server_info")
    report("tp 2: /server_info with the per-rank gather", ms_per_poll=(time.monotonic() - t0) * 50)


def test_concurrency_1_speculates_on_tp2(tp2):
    server, _, _ = tp2
    meta = server.generate("the quick brown fox", TOKENS)["meta_info"]
    assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)


def test_both_ranks_switch_together_and_back(tp2):
    """After the c=1 test the dwell is served, so c=6 runs target-only from its first step."""
    server, _, _ = tp2
    start = len(server.log_text())
    t0 = time.monotonic()
    outs = server.generate_batch(6, TOKENS)
    report("tp 2: c=6 x 31 tokens (target-only)", seconds=time.monotonic() - t0)
    assert all(o["meta_info"]["spec_num_correct_drafts"] == 0 for o in outs)
    log = server.log_text()[start:]
    assert _ranks(log, "switched to target-only (decode batch ") == {"TP0", "TP1"}
    start = len(server.log_text())
    out = server.generate("the lazy dog", TOKENS)
    meta = out["meta_info"]
    assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)
    assert _ranks(server.log_text()[start:], "switched to speculative") == {"TP0", "TP1"}


def _metrics(server) -> dict:
    """(name, tp_rank, mode/to label) -> value of the patch's samples on /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    req = urllib.request.Request(server.url + "/metrics")
    with urllib.request.urlopen(req, timeout=30) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith("sglang:spec_disable_"):
                key = (s.name, s.labels.get("tp_rank"), s.labels.get("mode") or s.labels.get("to"))
                out[key] = s.value
    return out


def test_metrics_carry_the_switch_of_every_rank(tp2):
    server, _, _ = tp2
    got = _metrics(server)
    for rank in ("0", "1"):
        assert got[("sglang:spec_disable_batch_threshold", rank, None)] == 2
        assert got[("sglang:spec_disable_active", rank, None)] == 1
        assert got[("sglang:spec_disable_switches_total", rank, "target_only")] >= 1
        assert got[("sglang:spec_disable_switches_total", rank, "speculative")] >= 1
    # TP0 publishes at SGLang's cadence (--decode-log-interval 4): steps and tokens per mode
    assert got[("sglang:spec_disable_decode_steps_total", "0", "target_only")] > 0
    assert got[("sglang:spec_disable_generated_tokens_total", "0", "target_only")] > 0
    assert got[("sglang:spec_disable_accept_length", "0", None)] == pytest.approx(3.0)


def test_exploration_flips_the_same_steps_on_both_ranks(tp2):
    """Exploration set at runtime reaches both ranks; its explored step count (from step
    numbers, batches and N only) is the same on both, and the ranks never disagree."""
    server, _, _ = tp2
    key, dwell_key = SHARE, DWELL
    (entry,) = server.request("/server_info")["internal_states"]
    dwell = entry["dynamic_speculation"]["min_dwell_steps"]
    assert server.request("/set_internal_state", {"server_args": {key: 0.1, dwell_key: 0}}) == [True]
    start = len(server.log_text())
    server.generate_batch(3, TOKENS)
    (entry,) = server.request("/server_info")["internal_states"]
    ranks = entry["dynamic_speculation"]["ranks"]
    assert [r["exploration"]["share"] for r in ranks] == [0.1, 0.1]
    explored = [r["exploration"]["explored_steps"] for r in ranks]
    assert explored[0] > 0 and explored[0] == explored[1], ranks
    assert entry["dynamic_speculation"]["active"] is True
    assert "disagree" not in server.log_text()[start:]
    assert _ranks(server.log_text(), "exploration share changed 0 -> 0.1") == {"TP0", "TP1"}
    assert server.request("/set_internal_state", {"server_args": {key: 0, dwell_key: dwell}}) == [True]
    report("tp 2: explored steps per rank", tp0=explored[0], tp1=explored[1])


def test_runtime_last_change_reaches_both_ranks(tp2):
    server, profile, state = tp2
    res = specconsole(["threshold", "8", "--profile", str(profile), "--json"], state)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert _ranks(server.log_text(), "Dynamic speculation: threshold changed 2 -> 8") == {"TP0", "TP1"}
    (entry,) = server.request("/server_info")["internal_states"]
    assert [r["threshold"] for r in entry["dynamic_speculation"]["ranks"]] == [8, 8]
    assert _metrics(server)[("sglang:spec_disable_batch_threshold", "1", None)] == 8
    res = specconsole(["stop", "--profile", str(profile), "--json"], state, timeout=120)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert server.processes() == []
