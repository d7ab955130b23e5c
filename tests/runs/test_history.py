"""The profile's compact history (server_control/state/history.py): bounded in points and
bytes while covering six hours, coarser further back without averaging away a restart or
an outage, read tolerantly, private, written at a low rate; and what the session records of
a poll (server_control/session/history_keeper.py)."""

from __future__ import annotations

import json
import os
import stat

from server_control.model.load import Load
from server_control.model.run_status import RunStatus
from server_control.session.history_keeper import HistoryKeeper, point_of
from server_control.state import history as h
from server_control.state.history import History, HistPoint, bucket, compact, history_path, read_history
from server_control.telemetry.sample import Sample

NOW = 1_800_000_000.0


def six_and_a_half_hours(poll_s: float = 1.0) -> list[HistPoint]:
    n = int(6.5 * 3600 / poll_s)
    return [
        HistPoint(
            NOW - (n - i) * poll_s + 0.123,
            batch=float(i % 12) + 0.37,
            tok_s=12345.6 + i % 7,
            accept=2.513,
            n=4096,
            mode=int(i % 12 > 5),
            run="2026-12-01T10:00:00.123456+00:00" + "x" * 30,  # longer than a run's start: cut
        )
        for i in range(n + 1)
    ]


def test_six_hours_of_polls_stay_bounded_and_coarser_further_back(tmp_path):
    kept = compact(six_and_a_half_hours(0.5), NOW)
    assert len(kept) <= h.MAX_POINTS
    ages = [NOW - p.ts for p in kept]
    assert max(ages) <= h.HORIZON_S
    assert max(ages) >= 6 * 3600 - 120, "covers six hours"
    assert [p.ts for p in kept] == sorted(p.ts for p in kept)
    for p, age in zip(kept, ages):
        want = 0.0 if age <= h.RAW_S else 10.0 if age <= 3600 else 60.0
        assert p.step == want or (want == 60.0 and p.step == 10.0 and age < 3600 + 10), (age, p.step)
    lines = [p.to_line() + "\n" for p in kept]
    assert max(map(len, lines)) <= h.LINE_BYTES and sum(map(len, lines)) <= h.MAX_BYTES
    raw = [p for p in kept if p.step == 0]
    assert len(raw) == h.MAX_RAW  # the last 5 min at 0.5 s: 600 polls, all kept
    path = tmp_path / "x.jsonl"
    history = History(path, clock=lambda: NOW)
    for p in six_and_a_half_hours(1.0):
        history.add(p)
    assert len(history.points) <= 2 * h.MAX_POINTS, "memory bounded while it runs"
    assert history.write()
    assert path.stat().st_size <= h.MAX_BYTES
    assert len(path.read_text().splitlines()) <= h.MAX_POINTS


def test_a_bucket_keeps_means_majority_mode_last_n_and_any_outage():
    pts = [
        HistPoint(NOW + 0, batch=2, tok_s=100, accept=3.0, n=5, mode=0, run="a"),
        HistPoint(NOW + 1, batch=8, tok_s=300, accept=2.0, n=6, mode=1, run="a"),
        HistPoint(NOW + 2, batch=8, tok_s=200, accept=None, n=None, mode=1, run="a"),
        HistPoint(NOW + 3, up=False, run="a"),
    ]
    (b,) = bucket(pts, 10.0)
    assert (b.batch, b.tok_s, b.accept, b.n, b.mode, b.up, b.step) == (6.0, 200.0, 2.5, 6, 1, False, 10.0)
    assert b.ts == NOW - NOW % 10


def test_a_restart_inside_a_bucket_is_not_averaged_away():
    pts = [HistPoint(NOW + i, batch=1, run="a") for i in range(4)] + [HistPoint(NOW + 4 + i, batch=9, run="b") for i in range(4)]
    out = bucket(pts, 60.0)
    assert [p.run for p in out] == ["a", "b"]
    assert [p.batch for p in out] == [1.0, 9.0]


def test_a_bad_line_is_skipped_and_counted_never_fatal(tmp_path):
    path = tmp_path / "p.jsonl"
    good = [HistPoint(NOW + i, batch=i, mode=i % 2, run="r") for i in range(3)]
    lines = [
        good[0].to_line(),
        "{not json",
        "[1, 2]",
        json.dumps({"ts": "yesterday"}),
        json.dumps({"b": 3}),
        good[1].to_line(),
        '{"ts": NaN}',
        "",
        good[2].to_line()[:-1] + ',"m":7,"n":"x"}',  # a bad field is dropped, the point kept
    ]
    path.write_text("\n".join(lines) + "\n")
    points, bad = read_history(path)
    assert bad == 5
    assert [p.ts for p in points] == [g.ts for g in good]
    assert points[2].mode is None and points[2].n is None and points[2].batch == 2
    assert read_history(tmp_path / "none.jsonl") == ([], 0)


def test_the_file_is_private_atomic_and_written_at_a_low_rate(tmp_path):
    clock = [NOW]
    path = history_path(tmp_path, "demo/../x")
    assert path.parent == tmp_path / "history" and path.name == "demo_.._x.jsonl"
    history = History(path, clock=lambda: clock[0])
    history.add(HistPoint(NOW, batch=3, run="r"))
    assert not history.maybe_write(), "not every poll"
    assert not path.exists()
    clock[0] += h.WRITE_EVERY_S
    history.add(HistPoint(clock[0], batch=4, run="r"))
    assert history.maybe_write()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert sorted(os.listdir(path.parent)) == [path.name, path.name + ".lock"], "no temporary file left beside it"
    again = History(path, clock=lambda: clock[0] + 60)
    assert [p.batch for p in again.points] == [3.0, 4.0]
    assert again.loaded_until == clock[0] == again.snapshot().until


def test_an_unwritable_place_is_said_not_raised(tmp_path):
    (tmp_path / "history").write_text("a file where the directory should be")
    history = History(tmp_path / "history" / "p.jsonl", clock=lambda: NOW)
    history.add(HistPoint(NOW, batch=1))
    assert not history.write()
    assert history.error and "history not saved" in history.error
    loose = tmp_path / "loose"
    (loose / "history").mkdir(parents=True)
    os.chmod(loose / "history", 0o777)
    history = History(loose / "history" / "p.jsonl", clock=lambda: NOW)
    history.add(HistPoint(NOW, batch=1))
    assert not history.write() and "world-writable" in (history.error or ""), history.error
    assert not (loose / "history" / "p.jsonl").exists()


def test_the_session_records_polls_outages_and_the_run(tmp_path):
    keeper = HistoryKeeper(tmp_path, "demo")
    run = RunStatus(state="running", started_at="2026-12-01T10:00:00+00:00")
    ok = Sample(ts=NOW, reachable=True, load=Load(batch=7, gen_throughput=500.0, accept_len=2.5))
    keeper.observe(ok, run, foreign=False)
    keeper.observe(Sample(ts=NOW + 1, reachable=False, error="refused"), run, foreign=False)
    keeper.observe(ok.__class__(ts=NOW + 2, reachable=True, load=ok.load), run, foreign=True)
    a, b, c = keeper.recorded().points
    assert (a.batch, a.tok_s, a.accept, a.up, a.run) == (7, 500.0, 2.5, True, "2026-12-01T10:00:00+00:00")
    assert not b.up and b.batch is None
    assert not c.up, "not this run's server: nothing of it is recorded"
    keeper.close()
    assert [p.ts for p in read_history(history_path(tmp_path, "demo"))[0]] == [NOW, NOW + 1, NOW + 2]
    assert point_of(ok, RunStatus()).run == ""
    assert HistoryKeeper(None, None).history.path is None
