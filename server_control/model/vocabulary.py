"""The words for how things stand, in one leaf module (standard library only): a run's state,
a setting change's state, an operation's outcome, their groups, and the run-state
transitions the supervisor may make. ``StrEnum``: each member IS its string, so JSON and
every comparison with a string read from JSON keep working unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class RunState(StrEnum):
    """A supervised run (``RunStatus.state``; the supervisor's ``state``)."""

    STARTING = "starting"  # launched (or restarted), not answering /health yet
    READY = "ready"  # answered /health (and /health_generate)
    UNHEALTHY = "unhealthy"  # was ready, the health checks fail now
    CRASHED = "crashed"  # the server's processes are gone without a stop; a restart may follow
    STOPPED = "stopped"  # stopped on purpose (or never started)
    FATAL = "fatal"  # crashed and will not be restarted (policy, start limit)


# A run whose server processes are there (it may answer or not).
LIVE_STATES: frozenset[RunState] = frozenset({RunState.STARTING, RunState.READY, RunState.UNHEALTHY})
# A run whose server processes are gone.
STOPPED_STATES: frozenset[RunState] = frozenset({RunState.CRASHED, RunState.STOPPED, RunState.FATAL})
# Gone and nothing will bring it back by itself (a crashed run may be restarted).
FINAL_STATES: frozenset[RunState] = frozenset({RunState.STOPPED, RunState.FATAL})

# The supervisor's state machine: from -> the states it may move to (as supervisord's
# _assertInState); staying in a state is no transition. A launch or restart starts again
# from STARTING, whatever came before, and adopting a live run found on disk (launched
# elsewhere) takes its STARTING or UNHEALTHY; the health watch moves a starting or
# unhealthy run to ready and a ready one to unhealthy; a live run crashes; the restart
# policy turns a crash into a restart (STARTING) or FATAL; a stop ends any live or crashed
# run in STOPPED. Never: ready without a health check passing, fatal without a crash first.
TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.STOPPED: frozenset({RunState.STARTING, RunState.UNHEALTHY, RunState.CRASHED, RunState.FATAL}),
    RunState.STARTING: frozenset({RunState.READY, RunState.UNHEALTHY, RunState.CRASHED, RunState.STOPPED}),
    RunState.READY: frozenset({RunState.STARTING, RunState.UNHEALTHY, RunState.CRASHED, RunState.STOPPED}),
    RunState.UNHEALTHY: frozenset({RunState.STARTING, RunState.READY, RunState.CRASHED, RunState.STOPPED}),
    RunState.CRASHED: frozenset({RunState.STARTING, RunState.UNHEALTHY, RunState.FATAL, RunState.STOPPED}),
    RunState.FATAL: frozenset({RunState.STARTING, RunState.UNHEALTHY, RunState.STOPPED}),
}


class OtherState(StrEnum):
    """``RunStatus.state`` where there is no run state of ours to say."""

    EXTERNAL = "external"  # an attached server: not a run of ours, no supervisor state
    UNKNOWN = "unknown"  # a remote member whose host has not said yet


EXTERNAL_STATE = OtherState.EXTERNAL
# What ``RunStatus.state`` may say
ServerState = RunState | OtherState


def server_state(raw: object) -> ServerState | None:
    """The state a JSON string names; None for anything else (another version's word too)."""
    if isinstance(raw, str):
        for vocabulary in (RunState, OtherState):
            try:
                return vocabulary(raw)
            except ValueError:
                continue
    return None


def change_state(raw: object) -> ChangeState | None:
    """The change state a JSON string names; None for anything else."""
    try:
        return ChangeState(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


class TransitionError(RuntimeError):
    """A run-state change the state machine does not allow (a bug, never an operator error)."""


def check_transition(old: RunState, new: RunState) -> None:
    """Raise ``TransitionError`` unless ``old == new`` or ``old -> new`` is in ``TRANSITIONS``."""
    if new != old and new not in TRANSITIONS[old]:
        allowed = ", ".join(sorted(TRANSITIONS[old]))
        raise TransitionError(f"run state {old} -> {new} is not allowed (from {old}: {allowed})")


class ChangeState(StrEnum):
    """How a runtime setting change went (``SettingChange.state``)."""

    PENDING = "pending"  # sent; not yet read back on every rank
    APPLIED = "applied"  # read back on every rank
    REFUSED = "refused"  # not sent: invalid value, not the owner, a change in flight
    UNSUPPORTED = "unsupported"  # the server cannot change it (not patched, switch off)
    ERROR = "error"  # the request or the read-back failed
    OVERRIDDEN = "overridden"  # another client changed it since
    ELSEWHERE = "elsewhere"  # not ours: another client changed it (seen in a poll)
    AUTO_TUNED = "auto-tuned"  # not ours: the server's own tuner moved N (seen in a poll)
    NOT_KEPT = "not kept"  # applied now, but could not be kept for a restart (record not written)


class Verdict(StrEnum):
    """How a verification layer went, and the three together (``VerifyLayer.status``,
    ``Verification.summary``)."""

    PASS = "pass"
    FAIL = "fail"
    PENDING = "pending"  # not judged yet (no answer, no decode step seen)


def verdict(raw: object) -> Verdict | None:
    """The verdict a JSON string names; None for anything else."""
    try:
        return Verdict(raw) if isinstance(raw, str) else None
    except ValueError:
        return None


class MemberOutcome(StrEnum):
    """How an action went on one fleet member (``MemberResult.outcome``)."""

    OK = "ok"
    PENDING = "pending"  # a verification not judged yet
    FAILED = "failed"
    REFUSED = "refused"
    NO_ANSWER = "no-answer"  # the member (its host, its tunnel, its server) did not answer


class Outcome(StrEnum):
    """How a session operation went (``OperationResult.outcome``)."""

    DONE = "done"  # it happened
    REFUSED = "refused"  # not attempted or turned down; nothing changed
    FAILED = "failed"  # attempted and did not work


# A setting change's state -> the operation's outcome (keyed by str: a state read from JSON finds it).
CHANGE_OUTCOME: dict[str, Outcome] = {
    ChangeState.APPLIED: Outcome.DONE,
    ChangeState.REFUSED: Outcome.REFUSED,
    ChangeState.UNSUPPORTED: Outcome.REFUSED,
    ChangeState.ERROR: Outcome.FAILED,
    ChangeState.PENDING: Outcome.FAILED,
    ChangeState.OVERRIDDEN: Outcome.FAILED,
    ChangeState.NOT_KEPT: Outcome.FAILED,
}
