"""What a run record found on disk means for the supervisor that adopts it
(``Supervisor.adopt``): its server lives (starting, or unhealthy as recorded); it is gone
but processes of its run remain; it ended FATAL (kept until someone acts: reading is not
acting); or it crashed, with its exit status when the keeper recorded it and who will
restart it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from server_control.host import identity
from server_control.model.vocabulary import RunState
from server_control.proc import process
from server_control.state import run_logs, runs
from server_control.supervision.crash_restart import TAIL_LINES
from server_control.supervision.health_watch import exit_words
from server_control.supervision.run_facts import RunFacts


def reading(
    rec: runs.RunRecord, live: bool, exit_file: Path, supervised: Callable[[], bool], last_exit: str | None
) -> tuple[RunState, RunFacts]:
    """The state and the facts ``rec`` gives (``live``: its server is there; ``supervised``:
    whether someone holds the run's restart lock; ``last_exit``: the one already known)."""
    if live:
        state = RunState.UNHEALTHY if rec.health == RunState.UNHEALTHY else RunState.STARTING
        return state, RunFacts(
            record=rec,
            restarts=rec.restarts,
            exit_code=None,
            fatal_reason=None,
            last_error=None,
            last_exit=rec.last_exit or last_exit,
        )
    left = identity.run_processes(rec.identity())
    if left:
        names = "; ".join(f"pid {p.pid}: {p.cmdline}" for p in process.describe(left))
        return RunState.CRASHED, RunFacts(
            record=rec,
            last_error=(
                f"server pid {rec.pid} is gone but {len(left)} process(es) of its run remain "
                f"({names}); stop or launch cleans them up"
            ),
        )
    if rec.fatal_reason:  # kept until someone acts (launch, stop, restart): reading is not acting
        return RunState.FATAL, RunFacts(
            record=rec,
            fatal_reason=rec.fatal_reason,
            exit_code=rec.exit_code,
            restarts=rec.restarts,
            fatal_tail=run_logs.tail_lines(rec.log_path, TAIL_LINES),
        )
    # the keeper writes the code after it reaped the server: while it runs, wait for it
    code = process.exit_status(exit_file, rec.pid, rec.create_time, wait_s=0, keeper_runs=rec.keeper_runs)
    who = (
        "the process supervising it restarts it"
        if supervised()
        else "nobody supervises it: `specconsole launch` or `supervise` starts it again"
    )
    ended = f"exited ({exit_words(code)})" if rec.ready_at else f"exited before ready: {exit_words(code)}"
    return RunState.CRASHED, RunFacts(
        record=rec,
        exit_code=code,
        restarts=rec.restarts,
        last_error=f"server pid {rec.pid} {ended}; {who}",
    )
