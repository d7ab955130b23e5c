"""The in-server tuner on a real tp-2 rig server (gloo, CPU): started with
``--speculative-disable-auto-tune 1-8`` and exploration 0.1 (so both modes' curves exist
near N), under traffic spanning N, TP0 moves N from its own cost curves and the move rides
SGLang's request broadcast: both ranks log it and read back the same threshold in
``/server_info``; an operator's N turns tuning off on both ranks.

On this rig speculation wins at every batch (docs/cpu-rig.md, ``mode_cost``), so the
tuner moves N up from 2 (``speculation faster at every measured batch``)."""

from __future__ import annotations

import json
import re
import time

import pytest

from server_control.protocol import cost_curves, crossover
from tests.real_sglang.conftest import SKIP_NO_SGLANG, cli_server, report

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
TOKENS = 24
MOVE = "Dynamic speculation: threshold 2 -> "


def _ranks(text: str, needle: str) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M) if needle in m.group(2)}


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


def test_tp0_moves_n_and_both_ranks_apply_it(rig, tmp_path):
    t0 = time.monotonic()
    extra = ("--speculative-disable-auto-tune", "1-8", "--speculative-disable-explore-share", "0.1")
    with cli_server(
        rig, tmp_path, "tp 2 auto-tune server ready", tp=2, threshold=2, name="rig-autotune", extra_args=extra
    ) as run:
        server = run.server
        assert _ranks(server.log_text(), "Dynamic speculation: auto-tune on, N within 1-8") == {"TP0", "TP1"}
        assert _live(server)["auto_tune"]["moves"] == 0
        traffic_t0, batches, live = time.monotonic(), 0, _live(server)
        while live["auto_tune"]["moves"] == 0 and time.monotonic() - traffic_t0 < 420:
            for n in (1, 2, 3, 4, 5, 6):
                server.generate_batch(n, TOKENS)
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
        assert server.request("/set_internal_state", {"server_args": {"speculative_disable_batch_threshold": 1}}) == [True]
        after = _live(server)
        assert after["auto_tune"]["on"] is False and after["auto_tune"]["off_reason"] == "threshold set to 1 by the operator"
        assert [r["threshold"] for r in after["ranks"]] == [1, 1]
        assert [r["auto_tune"]["on"] for r in after["ranks"]] == [False, False]
        off = "Dynamic speculation: auto-tune off (threshold set to 1 by the operator)"
        assert _ranks(server.log_text(), off) == {"TP0", "TP1"}
        server.generate_batch(4, TOKENS)
        time.sleep(2)
        assert _live(server)["threshold"] == 1  # no move after it
    report("tp 2 auto-tune test", wall_s=time.monotonic() - t0)
