"""The three verification layers over plain inputs (samples, records, timeline events)."""

from __future__ import annotations

from types import SimpleNamespace as Rec

from server_control.control.verify import (
    CAUSE_NO_INIT,
    CAUSE_NO_SWITCH,
    CAUSE_NOT_PATCHED,
    SwitchWatch,
    configuration,
    expected_ranks,
    initialisation,
    layer,
    summary,
)
from server_control.model.load import Load
from server_control.telemetry.sample import Sample, sample_from_server_info

K = "speculative_disable_batch_threshold"


def info(flat=5, per_rank=(5,), batch=0, mode="speculative", force="auto", ts=0.0):
    body = {
        "tp_size": 2,
        "internal_states": [
            {
                K: v,
                "speculative_disable_hysteresis": 1,
                "speculative_disable_min_dwell_steps": 10,
                "speculative_disable_force_mode": force,
                "dynamic_speculation": {"mode": mode},
            }
            for v in per_rank
        ],
    }
    if flat is not None:
        body[K] = flat
    s = sample_from_server_info(ts, body)
    s.load = Load(batch=batch)
    return s


def _capped(threshold, running=48, max_bs=None, flat_running=None):
    body = {
        "internal_states": [
            {
                K: threshold,
                "dynamic_speculation": {
                    "mode": "speculative",
                    "limits": {"max_running_requests": running, "cuda_graph_max_bs": max_bs},
                },
            }
        ],
        K: threshold,
    }
    if flat_running is not None:
        body["internal_states"][0]["dynamic_speculation"].pop("limits")
        body["max_running_requests"] = flat_running
    return sample_from_server_info(0, body)


def test_a_threshold_at_the_running_cap_can_never_trigger():
    never = configuration(_capped(48), 48)
    assert never.status == "fail"
    assert never.cause == (
        "threshold 48 can never trigger: the decode batch never exceeds "
        "max_running_requests=48 (SGLang caps an EAGLE server at 48 running "
        "requests unless --max-running-requests is set)"
    )
    assert configuration(_capped(47), 47).status == "pass"
    assert "can never trigger" in configuration(_capped(64, running=None, flat_running=64), 64).cause  # the flat resolved arg
    assert configuration(_capped(100, running=128), 100).status == "pass"


def test_a_threshold_at_the_graph_cap_warns_that_target_only_runs_eager():
    eager = configuration(_capped(32, running=256, max_bs=32), 32)
    assert eager.status == "pass"
    assert ("warning: threshold 32 >= cuda_graph_max_bs 32: target-only above 32 runs without CUDA graphs") in eager.evidence
    assert "warning" not in configuration(_capped(31, running=256, max_bs=32), 31).evidence


def test_configuration_layer():
    assert configuration(None, 5).status == "pending"
    assert configuration(Sample(ts=0, reachable=False, error="refused"), 5).status == "pending"
    ok = configuration(info(), 5)
    assert ok.status == "pass" and f"{K}=5" in ok.evidence
    assert "changed at runtime" in configuration(info(per_rank=(8,)), 5).evidence
    bad = configuration(info(flat=3, per_rank=(3,)), 5)
    assert bad.status == "fail" and "profile asks 5" in bad.evidence and bad.cause
    stock = configuration(sample_from_server_info(0, {"internal_states": [{}]}), 5)
    assert stock.status == "fail" and stock.cause == CAUSE_NOT_PATCHED
    assert configuration(info(flat=7, per_rank=(7,)), None).status == "pass"
    zero = configuration(info(flat=0, per_rank=(0,)), None)
    assert zero.status == "fail" and "threshold 0" in zero.cause


def init(rank, line, n=5):
    return Rec(
        kind="spec_init",
        rank=rank,
        line=line,
        threshold=n,
        text=f"Dynamic speculation disable enabled: threshold={n}, resume_at<=4, min_dwell_steps=10",
    )


READY = Rec(kind="ready", rank=None, line=40, text="The server is fired up and ready to roll!")


def test_initialisation_layer():
    args = dict(ranks_expected=2, server_ready=True, log_attached=True)
    ok = initialisation([init("TP0", 12), init("TP1", 13)], [], [READY], **args)
    assert ok.status == "pass" and "2/2" in ok.evidence and "log line 12" in ok.evidence
    partial = initialisation([init("TP0", 12)], [], [READY], **args)
    assert partial.status == "fail" and "only 1 of 2" in partial.cause
    missing = initialisation([], [], [READY], **args)
    assert missing.status == "fail" and missing.cause == CAUSE_NO_INIT and "log line 40" in missing.evidence
    assert initialisation([], [], [], **args).status == "pending"
    assert initialisation([init("TP0", 12)], [], [], **args).status == "pending"
    not_active = Rec(
        kind="warning", rank="TP0", line=9, text="Dynamic speculation disable NOT active: speculative_eagle_topk=4 (needs topk=1)"
    )
    na = initialisation([], [not_active], [], **args)
    assert na.status == "fail" and na.cause == "speculative_eagle_topk=4 (needs topk=1)"
    assert "log line 9" in na.evidence
    nolog = initialisation([], [], [], ranks_expected=1, server_ready=True, log_attached=False)
    assert nolog.status == "pending" and "no server log" in nolog.evidence


def test_expected_ranks():
    assert expected_ranks(2, 1) == 2 and expected_ranks(2, 2) == 4 and expected_ranks(4, 2, True) == 4
    assert expected_ranks(None, None) == 1


def ev(mode, t, line, forced=False):
    text = f"Dynamic speculation: switched to {mode}" + (" (forced)" if forced else " (decode batch 7 > threshold 5)")
    return {"mode": mode, "t": t, "line": line, "text": text, "batch": 7, "threshold": 5}


def test_runtime_pass_needs_down_then_back():
    w = SwitchWatch()
    w.observe(info(batch=2))
    assert w.status([]).status == "pending"
    assert "not exceeded" in w.status([]).evidence
    w.observe(info(batch=8, ts=2.0))
    down = [ev("target_only", 2.5, 50)]
    r = w.status(down)
    assert r.status == "pending" and "log line 50" in r.evidence
    both = down + [ev("speculative", 4.0, 60)]
    r = w.status(both)
    assert r.status == "pass" and "log line 50" in r.evidence and "log line 60" in r.evidence


def test_runtime_forced_switches_do_not_count():
    w = SwitchWatch()
    w.observe(info(batch=8))
    events = [ev("target_only", 1.0, 5, forced=True), ev("speculative", 2.0, 6, forced=True)]
    assert w.status(events).status == "pending"


def test_runtime_fails_when_batch_stays_above_without_switch():
    w = SwitchWatch(step_s=0.1)  # grace = 3 + 10 * 0.1 = 4 s
    for t in range(0, 4):
        w.observe(info(batch=9, ts=float(t)))
    assert w.status([]).status == "pending"
    for t in range(4, 7):
        w.observe(info(batch=9, ts=float(t)))
    r = w.status([])
    assert r.status == "fail" and r.cause == CAUSE_NO_SWITCH and "batch 9 > threshold 5" in r.evidence
    # the batch dropping ends the stuck period
    w.observe(info(batch=3, ts=7.0))
    assert w.status([]).status == "pending"


def test_runtime_fails_when_it_never_switches_back():
    w = SwitchWatch(step_s=0.1)
    down = [ev("target_only", 0.5, 50)]
    for t in range(0, 7):
        w.observe(info(batch=2, mode="target_only", ts=float(t)))
    r = w.status(down)
    assert r.status == "fail" and "stayed there" in r.evidence


def test_runtime_forced_mode_pending():
    w = SwitchWatch()
    w.observe(info(batch=9, force="target_only", mode="target_only"))
    assert "forced" in w.status([]).evidence


def test_runtime_polled_forced_switch_does_not_pass():
    """`threshold --force target_only` then `--force auto` at batch 1: the poll sees the
    forced switch only as last_switch (no "(forced)" text); the rule's switch back is logged."""
    w = SwitchWatch()
    w.observe(info(batch=1))
    down = {
        "mode": "target_only",
        "t": 1.0,
        "line": None,
        "source": "poll",
        "batch": 1,
        "threshold": 5,
        "text": "internal_states[0].dynamic_speculation: switch_count=1, last_switch={'to': 'target_only'}",
    }
    back = {
        "mode": "speculative",
        "t": 2.0,
        "line": 76,
        "source": "log",
        "batch": 1,
        "threshold": 5,
        "text": "Dynamic speculation: switched to speculative (decode batch 1 <= 4, threshold 5)",
    }
    assert w.status([down, back]).status == "pending"
    by_rule = dict(down, batch=7, t=1.5)
    assert w.status([down, by_rule, back]).status == "pass"


def test_summary_and_exit_codes():
    p = layer("x", "pass", "")
    assert summary([p, p, p]).exit_code == 0
    assert summary([p, layer("y", "pending", ""), p]).exit_code == 3
    assert summary([p, layer("y", "pending", ""), layer("z", "fail", "")]).exit_code == 1


def test_runtime_pending_before_any_live_sample_says_so_without_none():
    w = SwitchWatch()
    r = w.status([])
    assert r.status == "pending" and "None" not in r.evidence
    assert "read from the server yet" in r.evidence
    w.observe(Sample(ts=0, reachable=False, error="refused"))
    assert "None" not in w.status([]).evidence


def test_runtime_idle_after_the_switch_is_pending_not_fail():
    """Issue 15: a batched request of 6 crosses N (5 here), the worker switches to target-only and
    all six sequences end on the same step (6 -> 0). Nothing decodes afterwards, so nothing
    can switch back: idle time is not evidence against the switch."""
    w = SwitchWatch(step_s=0.1)
    down = [ev("target_only", 1.0, 50)]
    w.observe(info(batch=6, mode="speculative", ts=0.0))
    w.observe(info(batch=6, mode="target_only", ts=1.0))
    for t in range(2, 48):  # 46 s of idle
        w.observe(info(batch=0, mode="target_only", ts=float(t)))
    r = w.status(down)
    assert r.status == "pending", r
    assert "log line 50" in r.evidence
    assert "idle since the switch; judged at the next decode step" in r.evidence


def test_runtime_counts_only_decode_time_at_or_below_the_low_mark():
    """Grace 4 s (3 s + 10 steps x 0.1 s) of DECODE time with 1 <= batch <= low mark while
    target-only; idle polls in between neither count nor reset that evidence."""
    w = SwitchWatch(step_s=0.1)
    down = [ev("target_only", 0.5, 50)]
    for t in (0, 1, 2):  # 2 s at batch 2 (low mark 4)
        w.observe(info(batch=2, mode="target_only", ts=float(t)))
    for t in range(3, 60):  # a long idle
        w.observe(info(batch=0, mode="target_only", ts=float(t)))
    idle = w.status(down)
    assert idle.status == "pending", idle
    assert "idle" in idle.evidence and "judged at the next decode step" in idle.evidence
    for t in (60, 61):  # +1 s: 3 s of evidence, still under the grace
        w.observe(info(batch=1, mode="target_only", ts=float(t)))
    assert w.status(down).status == "pending"
    for t in (62, 63):  # +2 s: 5 s > 4 s
        w.observe(info(batch=1, mode="target_only", ts=float(t)))
    r = w.status(down)
    assert r.status == "fail" and "stayed there 5.0 s" in r.evidence, r
    # a batch between the low mark and N (hysteresis band) makes the switch back not due
    w.observe(info(batch=5, mode="target_only", ts=64.0))
    assert w.status(down).status == "pending"


def test_runtime_an_operators_n0_is_not_a_switch_back():
    """Issue 23 item 10: N=0 switches back at any batch ("threshold 0: never disable"): not
    evidence that the rule brings speculation back."""
    w = SwitchWatch()
    w.observe(info(batch=8, ts=1.0))
    n0 = {
        "mode": "speculative",
        "t": 3.0,
        "line": 61,
        "batch": 8,
        "threshold": 0,
        "text": "Dynamic speculation: switched to speculative (threshold 0: never disable)",
    }
    r = w.status([ev("target_only", 2.0, 50), n0])
    assert r.status == "pending", r  # before: pass, citing the N=0 switch


def test_runtime_a_later_stuck_failure_is_not_masked_by_an_earlier_pass():
    w = SwitchWatch(step_s=0.1)  # grace 4 s
    events = [ev("target_only", 0.5, 50), ev("speculative", 1.0, 60)]
    for t in range(2, 9):
        w.observe(info(batch=9, ts=float(t)))  # later: above N in speculative, no switch
    r = w.status(events)
    assert r.status == "fail" and r.cause == CAUSE_NO_SWITCH, r  # before: pass from the first pair
