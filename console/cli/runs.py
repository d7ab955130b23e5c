"""`specconsole launch | stop | restart`: the server's life cycle without a screen
(`supervise` is in ``console.cli.supervise``).

The profile is `--profile F` (a path, or a shipped profile's name such as "demo") with its
state dir (`--state-dir DIR`, default $SPECCONSOLE_STATE_DIR or the user's), or the run of
`specconsole demo` (`--demo`: `<state dir>/demo`, the port it took); with neither,
`$SPECCONSOLE_PROFILE`, else the demo's run. Runs outlive this command: the server runs in
its own session and writes its own log file. See docs/operations.md.

Exit codes (each command's --help lists its own): 0 done; 1 failed (the server died, stop
left processes); 2 bad profile or arguments; 3 refused: a live run already holds the
profile or its port; 4 --wait timed out before the server was ready; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys

from console.cli.common import (
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    UsageError,
    add_demo_arguments,
    add_profile_argument,
    error,
    target_profile,
)
from console.cli.deferred_signals import deferred, exit_code
from console.cli.launch_preview import parse_refusal, print_preview
from server_control.config.profile import ProfileError
from server_control.model.vocabulary import LIVE_STATES, Outcome, RunState
from server_control.protocol.arg_types import seconds_where, server_port
from server_control.state import restart_lock, run_logs, runs
from server_control.state.runs import RunConflict
from server_control.supervision import carried_settings as runtime_settings
from server_control.supervision.supervisor import Supervisor

EPILOGS = {
    "launch": "Exit codes: 0 launched (with --wait: ready), 1 failed, 2 bad profile/arguments, 3 a live run "
    "holds the profile or port, 4 --wait timed out, 130 interrupted.",
    "stop": "Exit codes: 0 stopped (or nothing was running), 1 processes of the run are left, "
    "2 bad profile/arguments, 130 interrupted.",
    "restart": "Exit codes: 0 restarted (with --wait: ready), 1 failed, 2 bad profile/arguments, "
    "3 something else holds the port, 4 --wait timed out, 130 interrupted.",
}


def out(args, obj: dict, text: str) -> None:
    """``obj`` as a JSON line with --json, else ``text``."""
    print(json.dumps(obj) if args.json else text, flush=True)


def _load(args):
    """The profile (--profile F or the demo's run); its state dir goes to ``args.run_state_dir``."""
    try:
        profile, args.run_state_dir = target_profile(args)
    except UsageError as exc:
        raise ProfileError(str(exc)) from None
    return profile


def supervisor_for(args, profile, **kw) -> Supervisor:
    """The profile's supervisor in the state dir ``load`` chose."""
    return Supervisor(profile, state_dir=getattr(args, "run_state_dir", None), **kw)


def with_profile(args, action) -> int:
    """Load the profile (a bad one exits 2 naming file and key), then run ``action``."""
    try:
        profile = _load(args)
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE
    return asyncio.run(action(args, profile))


def run_dict(rec: runs.RunRecord | None) -> dict | None:
    if rec is None:
        return None
    return {
        "pid": rec.pid,
        "pgid": rec.pgid,
        "port": rec.port,
        "host": rec.host,
        "log_path": rec.log_path,
        "started_at": rec.started_at,
        "restarts": rec.restarts,
        "argv": rec.argv,
    }


# ---- launch -------------------------------------------------------------------------------
def cmd_launch(args) -> int:
    try:
        profile = _load(args)
        if args.port is not None:  # this run's port instead of the profile's (the demo's: 30000 or a free one)
            profile = dataclasses.replace(profile, server={**profile.server, "port": args.port})
        if args.dry_run:
            return print_preview(args, profile)
        refusal = parse_refusal(args, profile)
        if refusal is not None:
            error(refusal)
            return EXIT_USAGE
        return asyncio.run(_launch(args, profile))
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE


REAPPLY_WAIT_S = 600.0  # restart with runtime settings and no --wait: wait this long to re-apply them


async def _launch(args, profile, sup: Supervisor | None = None, runtime: dict | None = None, bare: bool | None = None) -> int:
    """Launch: by the run's own detached supervisor, or here (``--no-supervise``; a restart:
    ``sup`` given, ``runtime`` the settings it carries, ``bare`` whether the run was launched
    ``--no-supervise``). A run launched here that should have a supervisor and has none gets
    one; without one, runtime settings are re-applied here once ready (waited for even
    without --wait)."""
    supervised = ""
    spawned = False
    if sup is None and not args.no_supervise:
        sup = supervisor_for(args, profile)
        got = await _launch_supervised(args, profile, sup)
        if isinstance(got, int):
            return got
        rec, supervised = got
    else:
        bare = args.no_supervise if bare is None else bare
        sup = sup or supervisor_for(args, profile)
        try:
            rec = await sup.launch(runtime=runtime, unsupervised=bare)
        except RunConflict as exc:
            error(f"refused: {exc}")
            return EXIT_CONFLICT
        except (OSError, RuntimeError) as exc:
            error(f"launch failed: {exc}")
            return EXIT_FAILED
        if bare:
            supervised = "nobody supervises it (--no-supervise): a crash is not restarted"
        else:
            supervised, spawned = _supervisor_for_relaunch(profile, sup)
    state = sup.state
    wait = args.wait
    held = spawned or restart_lock.RestartLock.held_elsewhere(profile.name, sup.state_dir)
    if wait is None and rec.runtime_pending and not held:
        wait = REAPPLY_WAIT_S  # nobody else would re-apply them: wait for ready and do it here
        if not args.json:
            print(
                f"{profile.name}: waiting until ready to re-apply the runtime settings "
                f"({runtime_settings.describe(rec.runtime, profile.dynamic)})",
                flush=True,
            )
    elif rec.runtime_pending and held:
        carried = runtime_settings.describe(rec.runtime, profile.dynamic)
        supervised += f"; it re-applies the runtime settings once ready: {carried}"
    if wait is not None and state in LIVE_STATES:  # (a run's supervisor may have found it FATAL already)
        state = await sup.wait_ready(wait)
    out(
        args,
        {
            "profile": profile.name,
            "state": state,
            "run": run_dict(rec),
            "exit_code": sup.exit_code,
            "error": sup.last_error,
            "runtime_note": sup.runtime_note,
            "supervisor": supervised or None,
        },
        f"launched {profile.name}: pid {rec.pid} (group {rec.pgid}) on {profile.url}, "
        f"state {state}\nlog: {rec.log_path}"
        + (f"\n{supervised}" if supervised else "")
        + (f"\n{sup.last_error}" if sup.last_error else "")
        + (f"\n{sup.runtime_note}" if sup.runtime_note and sup.runtime_note != sup.last_error else ""),
    )
    if wait is None or state == RunState.READY:
        return EXIT_OK if not (runtime and sup.last_error and "re-apply" in sup.last_error) else EXIT_FAILED
    if state != RunState.STARTING and not args.json:
        tail = run_logs.tail_lines(rec.log_path, 20)
        print(f"--- last {len(tail)} lines of {rec.log_path} ---", *tail, sep="\n", file=sys.stderr)
    return EXIT_TIMEOUT if state == RunState.STARTING else EXIT_FAILED


def _supervisor_for_relaunch(profile, sup: Supervisor) -> tuple[str, bool]:
    """After a restart made here: the run's supervisor follows the new server (it waits
    ``supervise --linger`` for it); when there is none, one is started. (What to say, whether
    one was started.)"""
    from console.run_supervisor import DetachedSupervisors  # noqa: PLC0415

    if restart_lock.RestartLock.held_elsewhere(profile.name, sup.state_dir):
        return "its supervisor follows the new server", False
    supervisors = DetachedSupervisors.for_profile(profile, sup.state_dir)
    if isinstance(supervisors, str):
        return f"nobody supervises it: {supervisors}", False
    return supervisors.adopt(profile.port).detail, True


async def _launch_supervised(args, profile, sup: Supervisor) -> tuple[runs.RunRecord, str] | int:
    """The run launched by its own detached supervisor (console/run_supervisor.py): (the
    record, what supervises it), or the exit code of a refusal or failure (said)."""
    from console.run_supervisor import DetachedSupervisors  # noqa: PLC0415

    live = sup.adopt()
    if live is not None:
        error(f"refused: profile {profile.name!r} is already running: pid {live.pid} on {live.host}:{live.port}")
        return EXIT_CONFLICT
    supervisors = DetachedSupervisors.for_profile(profile, sup.state_dir)
    if isinstance(supervisors, str):  # cannot happen for a profile loaded from its file
        error(f"launch failed: no detached supervisor can run this profile: {supervisors}")
        return EXIT_FAILED
    got = await supervisors.launch(profile.port)
    if got.outcome != Outcome.DONE:
        if "already running" in got.detail or "is held by" in got.detail:
            error(got.detail if got.detail.startswith("refused") else f"refused: {got.detail}")
            return EXIT_CONFLICT
        error(got.detail if got.outcome == Outcome.FAILED else f"refused: {got.detail}")
        return EXIT_FAILED if got.outcome == Outcome.FAILED else EXIT_USAGE
    rec = sup.adopt() or sup.record
    if rec is None:
        error(f"launch failed: the supervisor launched it, but the run has ended already ({got.detail})")
        return EXIT_FAILED
    return rec, got.detail


# ---- stop / restart -----------------------------------------------------------------------
def cmd_stop(args) -> int:
    with deferred("stop") as got:
        code = with_profile(args, _stop)
    return exit_code(got, code)


async def _stop(args, profile) -> int:
    sup = supervisor_for(args, profile)
    sup.adopt()
    res = await sup.stop(grace=args.grace)
    try:
        out(args, {"profile": profile.name, **res.to_dict()}, f"{profile.name}: {res.message}")
    except OSError:
        pass  # the terminal is gone (a dropped ssh link): the stop itself is done
    return EXIT_OK if res.ok else EXIT_FAILED


def cmd_restart(args) -> int:
    return with_profile(args, _restart)


async def _restart(args, profile) -> int:
    sup = supervisor_for(args, profile)
    sup.adopt()
    carry = sup.current_runtime()  # N etc. changed at runtime: carried to the new server, as the console's `r`
    bare = sup.record is not None and sup.record.unsupervised
    with deferred("stop of the restart") as got:
        res = await sup.stop(grace=args.grace, keeping_runtime=True)
    if got:  # interrupted while stopping: the stop is finished, the new start is not made
        return exit_code(got, EXIT_FAILED)
    if not res.ok:
        error(f"restart aborted: {res.message}")
        return EXIT_FAILED
    if not args.json:
        print(f"{profile.name}: {res.message}", flush=True)
    try:
        return await _launch(args, profile, sup, runtime=carry, bare=bare)
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of every life-cycle command: the target (--profile or the demo's
    run) and --json."""
    common = argparse.ArgumentParser(add_help=False)
    target = common.add_mutually_exclusive_group()
    add_profile_argument(target)
    add_demo_arguments(common, target)
    common.add_argument("--json", action="store_true", help="print JSON")
    return common


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    common = common_parser()

    p = subparsers.add_parser(
        "launch",
        parents=[common],
        formatter_class=fmt,
        epilog=EPILOGS["launch"],
        help="start the server of a profile (it outlives this command)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the exact command and the environment the profile adds (keys masked)"
    )
    p.add_argument(
        "--port",
        type=server_port,
        default=None,
        metavar="N",
        help="listen on port N (1..65535) instead of the profile's (with --demo: instead of 30000, or a free one if busy)",
    )
    p.add_argument(
        "--wait",
        type=seconds_where("0 = do not wait"),
        metavar="S",
        nargs="?",
        const=600.0,
        help="wait up to S seconds (default 600) until /health answers",
    )
    p.add_argument(
        "--no-supervise",
        action="store_true",
        help="a bare run: no detached supervisor (by default one launches it and restarts its crashes); "
        "nobody restarts a crash, and no console starts a supervisor for it",
    )
    p.set_defaults(func=cmd_launch)

    p = subparsers.add_parser(
        "stop",
        parents=[common],
        formatter_class=fmt,
        epilog=EPILOGS["stop"],
        help="stop the run: SIGTERM the group, grace, SIGKILL, confirm",
    )
    p.add_argument(
        "--grace", type=seconds_where("0 = SIGKILL at once"), metavar="S", help="seconds before SIGKILL (default: profile)"
    )
    p.set_defaults(func=cmd_stop)

    p = subparsers.add_parser(
        "restart", parents=[common], formatter_class=fmt, epilog=EPILOGS["restart"], help="stop, then launch"
    )
    p.add_argument(
        "--grace", type=seconds_where("0 = SIGKILL at once"), metavar="S", help="seconds before SIGKILL (default: profile)"
    )
    p.add_argument(
        "--wait",
        type=seconds_where("0 = do not wait"),
        metavar="S",
        nargs="?",
        const=600.0,
        help="wait up to S seconds (default 600) until /health answers",
    )
    p.set_defaults(func=cmd_restart)
