"""Panel series and the deduplicated mode timeline."""

from __future__ import annotations

from types import SimpleNamespace as Rec

from server_control.model.load import Load
from server_control.telemetry.sample import Sample, sample_from_server_info
from server_control.telemetry.series import ModeTimeline, PanelSeries, dp_group, per_mode


def switch(rank, mode, batch, line, ts="2026-11-29 10:00:00"):
    return Rec(
        kind="spec_switch",
        rank=rank,
        mode=mode,
        batch=batch,
        threshold=5,
        ts=ts,
        line=line,
        text=f"Dynamic speculation: switched to {mode}",
    )


def test_series_bounded_and_json():
    p = PanelSeries(maxlen=3)
    for i in range(5):
        s = Sample(ts=float(i), reachable=True, load=Load(batch=i, gen_throughput=10.0 * i))
        p.add_sample(s)
    out = p.to_json()
    assert out["batch"] == [[2.0, 2], [3.0, 3], [4.0, 4]]
    assert out["accept_len"] == [] and out["threshold"] == []


def test_unreachable_samples_leave_gaps():
    p = PanelSeries()
    p.add_sample(Sample(ts=1.0, reachable=False, error="down"))
    assert p.to_json()["batch"] == []


def test_dp_group():
    assert [dp_group(r) for r in ("DP3 TP3", "TP1", "TP0 EP0", None, "DPx")] == [3, 0, 0, 0, 0]


def test_switches_from_every_tp_rank_counted_once_even_interleaved():
    t = ModeTimeline()
    recs = [
        switch("TP0", "target-only", 7, 1),
        switch("TP0", "speculative", 3, 2),
        switch("TP1", "target-only", 7, 3),
        switch("TP1", "speculative", 3, 4),
        switch("TP1", "target-only", 8, 5),
        switch("TP0", "target-only", 8, 6),
    ]
    added = [t.add_record(r, now=float(i)) for i, r in enumerate(recs)]
    assert added == [True, True, False, False, True, False]
    assert [e["mode"] for e in t.to_json()] == ["target_only", "speculative", "target_only"]
    assert t.to_json()[0] == {
        "ts": "2026-11-29 10:00:00",
        "mode": "target_only",
        "batch": 7,
        "threshold": 5,
        "rank": "TP0",
        "forced": False,
    }


def info(count, mode, batch):
    return sample_from_server_info(
        float(count),
        {
            "internal_states": [
                {
                    "dynamic_speculation": {
                        "mode": mode,
                        "switch_count": count,
                        "last_switch": {"to": mode, "batch": batch, "threshold": 5},
                        "seconds": {"speculative": 3.0, "target_only": 1.0},
                        "tokens": {"speculative": 300, "target_only": 400},
                    }
                }
            ]
        },
    )


def test_polled_and_logged_switches_deduplicated():
    t = ModeTimeline()
    assert t.add_sample(info(1, "target_only", 7)) is True
    assert t.add_record(switch("TP0", "target-only", 7, 10), now=2.0) is False  # same switch, from the log
    # ... which brings the time and rank the poll could not know
    assert t.to_json()[0] == {
        "ts": "2026-11-29 10:00:00",
        "mode": "target_only",
        "batch": 7,
        "threshold": 5,
        "rank": "TP0",
        "forced": False,
    }
    assert t.add_record(switch("TP0", "speculative", 3, 11), now=3.0) is True
    assert t.add_sample(info(2, "speculative", 3)) is False
    assert t.add_sample(info(2, "speculative", 3)) is False
    assert [e["mode"] for e in t.events] == ["target_only", "speculative"]
    # the server restarted: its count went down, ordinals start again
    assert t.add_sample(info(1, "target_only", 9)) is True
    assert len(t.events) == 3


def test_a_poll_ahead_of_the_log_keeps_the_switches_in_their_order():
    """A poll can see switch 4 before the log follower has delivered switches 3 and 4 (two
    switches between polls). Switch 3, logged later, goes before 4 in the timeline, not after
    it: the list an operator reads stays in the order the switches happened (a fast-loop run
    saw target-only, speculative, speculative)."""
    t = ModeTimeline()
    for n, (mode, b) in enumerate([("target-only", 7), ("speculative", 3)], start=11):
        t.add_record(switch("TP0", mode, b, n), now=1.0)
    assert t.add_sample(info(4, "speculative", 3)) is True
    assert t.add_record(switch("TP0", "target-only", 8, 13), now=2.0) is True
    assert t.add_record(switch("TP0", "speculative", 3, 14), now=2.0) is False  # the poll's, now with its line
    assert [e["mode"] for e in t.events] == ["target_only", "speculative", "target_only", "speculative"]
    assert [e["batch"] for e in t.events] == [7, 3, 8, 3]


def test_per_mode_from_server_counters():
    out = per_mode(info(1, "target_only", 7), ModeTimeline(), PanelSeries())
    assert out == {"speculative": {"share": 0.75, "tok_s": 100.0}, "target_only": {"share": 0.25, "tok_s": 400.0}}


def test_per_mode_from_series_when_no_counters():
    t, p = ModeTimeline(), PanelSeries()
    for i, v in enumerate([100.0, 100.0, 300.0, 500.0]):
        p.add("gen_throughput", float(i), v)
    t.add_record(switch("TP0", "target-only", 7, 1, ts=None), now=2.0)  # no time stamp: when it was read
    out = per_mode(None, t, p)
    assert out == {"speculative": {"share": 0.5, "tok_s": 100.0}, "target_only": {"share": 0.5, "tok_s": 400.0}}


def test_a_new_run_starts_the_evidence_afresh_but_keeps_history_for_display():
    """After a restart the previous run's switches must not pass the runtime layer."""
    from server_control.control.verify import SwitchWatch

    t = ModeTimeline()
    t.add_record(switch("TP0", "target-only", 7, 1), now=1.0)
    t.add_record(switch("TP0", "speculative", 3, 2), now=2.0)
    assert SwitchWatch().status(t.current()).status == "pass"
    t.reset()  # the session follows the new run's log
    assert t.current() == [] and len(t.to_json()) == 2
    assert SwitchWatch().status(t.current()).status == "pending"
    # the same switches logged again by the new run count for it (ordinals restarted)
    assert t.add_record(switch("TP0", "target-only", 7, 1), now=5.0) is True
    assert [e["mode"] for e in t.current()] == ["target_only"]


def test_after_a_restart_the_counts_and_the_split_are_the_new_runs():
    """Issue 23 item 7: the spec/target split and the switch count spanned runs."""
    t, p = ModeTimeline(), PanelSeries()
    for i, v in enumerate([100.0, 100.0, 300.0, 500.0]):  # run 1: half of it target-only
        p.add("gen_throughput", float(i), v)
    t.add_record(switch("TP0", "target-only", 7, 1, ts=None), now=2.0)
    assert (t.total, t.earlier) == (1, 0)
    t.reset(began=10.0)  # the new run's log is followed
    for i, v in enumerate([200.0, 200.0]):  # run 2: speculative (a run starts so), no switch yet
        p.add("gen_throughput", 10.0 + i, v)
    assert (t.total, t.earlier) == (0, 1), "the counts start at the new run"
    out = per_mode(None, t, p)
    assert out == {"speculative": {"share": 1.0, "tok_s": 200.0}, "target_only": {"share": 0.0, "tok_s": None}}
    assert len(t.to_json()) == 1, "the old run's switch stays visible"
    t.add_record(switch("TP0", "target-only", 9, 1, ts=None), now=11.0)
    assert (t.total, t.earlier) == (1, 1)
    assert per_mode(None, t, p)["target_only"] == {"share": 0.5, "tok_s": 200.0}
    from server_control.session.snapshot_parts import SnapshotParts  # noqa: PLC0415

    shown = SnapshotParts(p, t).timeline_of(None)
    assert shown.earlier == 1 and len(shown.switches) == 2 and shown.per_mode["target_only"].share == 0.5


def test_forced_switches_are_marked():
    """`F` used to add a row 'spec None None', and a forced switch to target-only polled at
    batch 5 <= N looked like an ordinary crossing."""
    t = ModeTimeline()
    forced_log = Rec(
        kind="spec_switch",
        rank="TP0",
        mode="speculative",
        batch=None,
        threshold=None,
        ts="2026-11-29 10:00:00",
        line=1,
        text="Dynamic speculation: switched to speculative (forced)",
    )
    t.add_record(forced_log, now=1.0)
    t.add_sample(info(2, "target_only", 5))  # polled first: to target-only at batch 5 <= N 5
    assert [(e["mode"], e["forced"]) for e in t.to_json()] == [("speculative", True), ("target_only", True)]
    forced_too = Rec(
        **{**vars(forced_log), "mode": "target-only", "line": 2, "text": "Dynamic speculation: switched to target-only (forced)"}
    )
    assert t.add_record(forced_too, now=3.0) is False  # the log's line for the polled switch
    t.add_record(switch("TP0", "speculative", 3, 3), now=4.0)  # an ordinary switch back
    assert [(e["mode"], e["forced"]) for e in t.to_json()] == [
        ("speculative", True),
        ("target_only", True),
        ("speculative", False),
    ]


def test_polled_switch_evidence_is_words_not_a_python_repr():
    t = ModeTimeline()
    t.add_sample(info(1, "target_only", 7))
    text = t.events[-1]["text"]
    assert text == "polled internal_states[0].dynamic_speculation: switch 1 to target-only at decode batch 7 (threshold 5)"


def test_a_switch_keeps_its_own_time_not_when_it_was_read():
    import datetime

    t = ModeTimeline()
    t.add_record(switch("TP0", "target-only", 7, 1, ts="2026-11-29T10:00:00"), now=9e9)
    assert t.events[0]["t"] == datetime.datetime(2026, 11, 29, 10, 0, 0).timestamp()
    now = 1.8e9
    s = sample_from_server_info(
        now,
        {
            "internal_states": [
                {
                    "dynamic_speculation": {
                        "mode": "target_only",
                        "switch_count": 1,
                        "last_switch": {"to": "target_only", "batch": 7, "threshold": 5, "at": now - 30.0},
                    }
                }
            ]
        },
    )
    t2 = ModeTimeline()
    t2.add_sample(s)
    assert t2.events[0]["t"] == now - 30.0  # the patch's own time of the switch, not the poll's


def test_the_snapshots_series_built_from_the_new_points_equals_a_full_build():
    """The snapshot's series are appended to with the points added since the last build (a
    fleet builds 32 snapshots a second, 600 points a panel): after any number of points, with
    the panels full and dropping, they equal the tuples built from every point."""
    import random  # noqa: PLC0415

    from server_control.session.snapshot_parts import SnapshotParts  # noqa: PLC0415
    from server_control.telemetry.series import PANELS, ModeTimeline, PanelSeries  # noqa: PLC0415

    panels = PanelSeries(maxlen=50)
    parts = SnapshotParts(panels, ModeTimeline())
    rng = random.Random(7)
    t = 1000.0
    for _ in range(60):
        for _ in range(rng.choice((0, 1, 1, 2, 7, 49, 50, 51, 120))):
            t += 0.1234567
            name = rng.choice(PANELS)
            panels.add(name, t, rng.random())
        got = parts.series()
        for name in PANELS:
            assert getattr(got, name) == tuple((round(a, 3), v) for a, v in panels.series[name]), name


def test_the_switch_count_is_never_behind_the_switches_the_log_has_shown():
    """The log can show a switch before the next poll counts it (a fast-loop run: the
    verification passed on the logged switches and the snapshot said switch_count 0 beside
    a list of two switches). The count is the larger of the server's counter and the
    timeline's."""
    from server_control.model.switch_rate import SwitchRate  # noqa: PLC0415
    from server_control.session.snapshot_parts import SnapshotParts  # noqa: PLC0415

    t, p = ModeTimeline(), PanelSeries()
    polled = info(0, "speculative", 3)  # the poll before any switch
    t.add_sample(polled)
    t.add_record(switch("TP0", "target-only", 7, 1), now=1.0)
    t.add_record(switch("TP0", "speculative", 3, 2), now=2.0)
    parts = SnapshotParts(p, t)
    assert len(parts.timeline_of(polled).switches) == 2
    assert parts.spec(polled, SwitchRate()).switch_count == 2
    assert parts.spec(info(5, "speculative", 3), SwitchRate()).switch_count == 5  # the server's, when ahead
