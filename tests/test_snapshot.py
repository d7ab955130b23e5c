"""The typed session snapshot (server_control/model/snapshot.py): the JSON edge round-trips, bad
JSON is read tolerantly, the real session and the console's fake satisfy ``SessionLike``,
and a snapshot's long parts are rebuilt only when they change."""

from __future__ import annotations

import copy

from server_control.model.load import Load
from server_control.model.operation import OperationResult
from server_control.model.snapshot import SessionSnapshot, SettingChange
from server_control.model.vocabulary import Outcome
from server_control.session.api import SessionLike
from server_control.session.session import Session
from server_control.telemetry.sample import sample_from_server_info
from tests.cli.status_schema import RUN, problems, snapshot_schema
from tests.console.fakes import FakeSession, sample_snapshot


def test_json_round_trip_keeps_the_status_schema():
    raw = sample_snapshot()
    raw["switches"] = [{**s, "forced": False} for s in raw["switches"]]
    raw["run"] = {k: v for k, v in raw["run"].items() if k in snapshot_schema(RUN)["run"]}
    snap = SessionSnapshot.from_json(raw)
    assert snap.to_json() == raw
    assert problems(snap.to_json(), snapshot_schema(RUN)) == []
    assert snap.spec.threshold == 5 and snap.timeline.switches[-1].batch == 7 and snap.verify.summary == "pass"


def test_garbage_json_is_read_tolerantly():
    snap = SessionSnapshot.from_json(
        {
            "run": "nonsense",
            "spec": {"threshold": "x", "mode": 3},
            "series": {"batch": [["a"], [1, 2]]},
            "switches": [None, 5, {"mode": None}],
            "gpus": {"available": True, "devices": [7]},
            "verify": {"layers": "no"},
            "per_mode": [],
        }
    )
    assert snap.spec.threshold is None and snap.spec.mode is None and snap.run.state is None
    assert snap.series.batch == ((1, 2),) and snap.timeline.switches == () and snap.gpus.devices == ()
    assert snap.verify.layers == () and snap.verify.summary == "pending"


def test_the_session_and_the_fake_are_session_like():
    assert isinstance(FakeSession(), SessionLike)
    assert isinstance(Session.attach("http://127.0.0.1:9"), SessionLike)
    assert not isinstance(object(), SessionLike)


def test_one_result_type_says_done_refused_or_failed():
    assert OperationResult.of_change("threshold", SettingChange(8, "applied", "read back")).outcome == Outcome.DONE
    for state, outcome in (("refused", Outcome.REFUSED), ("unsupported", Outcome.REFUSED), ("error", Outcome.FAILED)):
        result = OperationResult.of_change("threshold", SettingChange(8, state, "why"))
        assert result.outcome == outcome and not result.done and result.message == "why"
        assert result.change.state == state  # the setting's own state stays in the details


def _sample(ts: float, batch: int):
    state = {"speculative_disable_batch_threshold": 5, "dynamic_speculation": {"mode": "speculative", "switch_count": 0}}
    s = sample_from_server_info(ts, {"tp_size": 1, "internal_states": [state]})
    s.load = Load(batch=batch, queue=0, source="loads")
    return s


def test_long_parts_are_rebuilt_only_when_they_change():
    session = Session.attach("http://127.0.0.1:9")
    session.poller.on_sample(_sample(100.0, 3))
    a, b = session.snapshot(), session.snapshot()
    assert a.series is b.series and a.timeline.switches is b.timeline.switches  # nothing new: same objects
    assert a == b and copy.copy(a) == a
    session.poller.on_sample(_sample(101.0, 4))
    c = session.snapshot()
    assert c.series is not a.series and c.series.batch[-1] == (101.0, 4) and c.live.batch == 4


def test_status_json_has_last_change_and_its_old_name_threshold_change():
    snap = SessionSnapshot.from_json(sample_snapshot())
    assert snap.last_change is not None
    out = snap.to_json()
    assert out["last_change"] == out["threshold_change"] == snap.last_change.to_json()
    assert list(out).index("threshold_change") == list(out).index("last_change") + 1
    # a status written by the previous version (only the old key) is still read
    old = {k: v for k, v in out.items() if k != "last_change"}
    assert SessionSnapshot.from_json(old).last_change == snap.last_change
    # the new key wins where both are there
    both = {**out, "threshold_change": None}
    assert SessionSnapshot.from_json(both).last_change == snap.last_change
    assert SessionSnapshot.from_json({**out, "last_change": None, "threshold_change": None}).last_change is None
