"""The supervisor's state machine: every run-state transition, allowed ones taken and the
others refused (server_control/model/vocabulary.py TRANSITIONS, checked in
Supervisor.update). The JSON keeps the plain strings."""

from __future__ import annotations

import itertools
import json

import pytest

from server_control.config.profile import load_profile
from server_control.model.vocabulary import (
    FINAL_STATES,
    LIVE_STATES,
    STOPPED_STATES,
    TRANSITIONS,
    ChangeState,
    Outcome,
    RunState,
    TransitionError,
    check_transition,
)
from server_control.supervision.supervisor import Supervisor

PAIRS = list(itertools.product(RunState, RunState))
# The ones the state machine must never make (a health check passes only for a live run; a
# run goes fatal only after a crash; a crashed run is not simply "ready" again).
NEVER = {
    (RunState.STOPPED, RunState.READY),
    (RunState.CRASHED, RunState.READY),
    (RunState.FATAL, RunState.READY),
    (RunState.FATAL, RunState.CRASHED),
    (RunState.STARTING, RunState.FATAL),
    (RunState.READY, RunState.FATAL),
    (RunState.UNHEALTHY, RunState.FATAL),
}


def _supervisor(make_profile, state: RunState) -> Supervisor:
    sup = Supervisor(load_profile(make_profile()))
    sup.state = state  # placed there directly: the walk starts from every state
    return sup


@pytest.mark.parametrize(("old", "new"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_every_transition_is_taken_or_refused_by_the_table(make_profile, old: RunState, new: RunState) -> None:
    sup = _supervisor(make_profile, old)
    seen: list[RunState] = []
    sup.on_change = lambda s: seen.append(s.state)
    if old == new or new in TRANSITIONS[old]:
        sup.update(new)
        assert sup.state == new
        assert seen == ([] if old == new else [new])
    else:
        with pytest.raises(TransitionError, match=f"{old} -> {new}"):
            sup.update(new)
        assert sup.state == old and seen == []  # refused: nothing changed, nobody told


def test_the_table_refuses_what_must_never_happen_and_allows_the_rest() -> None:
    assert set(TRANSITIONS) == set(RunState)
    for old, new in PAIRS:
        if old == new:
            check_transition(old, new)
        elif (old, new) in NEVER:
            assert new not in TRANSITIONS[old]
            with pytest.raises(TransitionError):
                check_transition(old, new)
        else:
            assert new in TRANSITIONS[old], f"{old} -> {new}"


def test_groups_partition_the_states_and_json_keeps_the_strings() -> None:
    assert LIVE_STATES | STOPPED_STATES == set(RunState) and not LIVE_STATES & STOPPED_STATES
    assert FINAL_STATES < STOPPED_STATES
    assert json.dumps([RunState.READY, ChangeState.APPLIED, Outcome.DONE]) == '["ready", "applied", "done"]'
    assert [s.value for s in RunState] == ["starting", "ready", "unhealthy", "crashed", "stopped", "fatal"]
    assert RunState("crashed") is RunState.CRASHED and "ready" == RunState.READY
