"""`specconsole launch | stop | restart | supervise`: the server's life cycle without a screen.

The profile is `--profile F` (a path, or a shipped profile's name such as "demo") with its
state dir (`--state-dir DIR`, default $SPECCONSOLE_STATE_DIR or the user's), or the run of
`specconsole demo` (`--demo`: `<state dir>/demo`, the port it took); with neither,
`$SPECCONSOLE_PROFILE`, else the demo's run. Runs outlive this command: the server runs in
its own session and writes its own log file. See docs/operations.md.

Exit codes (each command's --help lists its own): 0 done; 1 failed (the server died, stop
left processes, supervise ended FATAL); 2 bad profile or arguments; 3 refused: a live run
already holds the profile or its port; 4 --wait timed out before the server was ready;
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import signal
import sys
import time
from collections.abc import Callable

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
from server_control.config.interpreter import check_sglang
from server_control.config.profile import ProfileError
from server_control.model.vocabulary import LIVE_STATES, RunState
from server_control.protocol.arg_types import seconds_where
from server_control.state import run_logs, runs
from server_control.state.runs import RunConflict
from server_control.supervision import carried_settings as runtime_settings
from server_control.supervision.health_watch import exit_words
from server_control.supervision.ownership import HANDOFF, ROLE_WORDS
from server_control.supervision.supervisor import Supervisor

EPILOGS = {
    "launch": "Exit codes: 0 launched (with --wait: ready), 1 failed, 2 bad profile/arguments, 3 a live run "
    "holds the profile or port, 4 --wait timed out, 130 interrupted.",
    "stop": "Exit codes: 0 stopped (or nothing was running), 1 processes of the run are left, "
    "2 bad profile/arguments, 130 interrupted.",
    "restart": "Exit codes: 0 restarted (with --wait: ready), 1 failed, 2 bad profile/arguments, "
    "3 something else holds the port, 4 --wait timed out, 130 interrupted.",
    "supervise": "Exit codes: 0 detached (Ctrl-C) or the run was stopped elsewhere, 1 FATAL or the loop "
    "failed, 2 bad profile/arguments, 3 a live run holds the port, 130 interrupted.",
}


def _out(args, obj: dict, text: str) -> None:
    print(json.dumps(obj) if args.json else text, flush=True)


def _load(args):
    """The profile (--profile F or the demo's run); its state dir goes to ``args.run_state_dir``."""
    try:
        profile, args.run_state_dir = target_profile(args)
    except UsageError as exc:
        raise ProfileError(str(exc)) from None
    return profile


def _supervisor(args, profile, **kw) -> Supervisor:
    return Supervisor(profile, state_dir=getattr(args, "run_state_dir", None), **kw)


def _with_profile(args, action) -> int:
    """Load the profile (a bad one exits 2 naming file and key), then run ``action``."""
    try:
        profile = _load(args)
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE
    return asyncio.run(action(args, profile))


def _run_dict(rec: runs.RunRecord | None) -> dict | None:
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
        if args.dry_run:
            problems: list[str] = []
            spec = profile.launch_spec(getattr(args, "run_state_dir", None), preview=problems)
            sglang = check_sglang(spec.argv[0]) if profile.kind == "sglang" else None
            if sglang is not None and sglang.problem:
                problems.append(sglang.problem)
            problems = list(dict.fromkeys(problems))
            env = spec.masked_env_overrides()
            for problem in problems:
                error(f"warning: a real launch would fail: {problem}")
            if args.json:
                print(
                    json.dumps(
                        {
                            "profile": profile.name,
                            "argv": spec.masked_argv(),
                            "env": env,
                            "cwd": str(spec.cwd),
                            "log_path": str(spec.log_path),
                            "sglang": sglang.version if sglang else None,
                            "problems": problems,
                        }
                    )
                )
            else:
                print(f"# profile {profile.name} ({profile.path})")
                print(f"# cwd {spec.cwd}\n# log {spec.log_path}")
                if sglang is not None and sglang.version:
                    print(f"# {sglang.describe()}")
                for k, v in env.items():
                    print(f"{k}={shlex.quote(v)}")
                print(spec.command_line())
            return EXIT_OK
        return asyncio.run(_launch(args, profile))
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE


REAPPLY_WAIT_S = 600.0  # restart with runtime settings and no --wait: wait this long to re-apply them


async def _launch(args, profile, sup: Supervisor | None = None, runtime: dict | None = None) -> int:
    """Launch (``runtime``: the settings a restart carries, re-applied once ready: waited for
    even without --wait when no supervisor runs to do it)."""
    sup = sup or _supervisor(args, profile)
    try:
        rec = await sup.launch(runtime=runtime)
    except RunConflict as exc:
        error(f"refused: {exc}")
        return EXIT_CONFLICT
    except (OSError, RuntimeError) as exc:
        error(f"launch failed: {exc}")
        return EXIT_FAILED
    state = sup.state
    wait = args.wait
    if wait is None and rec.runtime_pending and not runs.RestartLock.held_elsewhere(profile.name, sup.state_dir):
        wait = REAPPLY_WAIT_S  # nobody else would re-apply them: wait for ready and do it here
        if not args.json:
            print(
                f"{profile.name}: waiting until ready to re-apply the runtime settings "
                f"({runtime_settings.describe(rec.runtime, profile.dynamic)})",
                flush=True,
            )
    if wait is not None:
        state = await sup.wait_ready(wait)
    _out(
        args,
        {
            "profile": profile.name,
            "state": state,
            "run": _run_dict(rec),
            "exit_code": sup.exit_code,
            "error": sup.last_error,
            "runtime_note": sup.runtime_note,
        },
        f"launched {profile.name}: pid {rec.pid} (group {rec.pgid}) on {profile.url}, "
        f"state {state}\nlog: {rec.log_path}"
        + (f"\n{sup.last_error}" if sup.last_error else "")
        + (f"\n{sup.runtime_note}" if sup.runtime_note and sup.runtime_note != sup.last_error else ""),
    )
    if wait is None or state == RunState.READY:
        return EXIT_OK if not (runtime and sup.last_error and "re-apply" in sup.last_error) else EXIT_FAILED
    if state != RunState.STARTING and not args.json:
        tail = run_logs.tail_lines(rec.log_path, 20)
        print(f"--- last {len(tail)} lines of {rec.log_path} ---", *tail, sep="\n", file=sys.stderr)
    return EXIT_TIMEOUT if state == RunState.STARTING else EXIT_FAILED


# ---- stop / restart -----------------------------------------------------------------------
def cmd_stop(args) -> int:
    return _with_profile(args, _stop)


async def _stop(args, profile) -> int:
    sup = _supervisor(args, profile)
    sup.adopt()
    res = await sup.stop(grace=args.grace)
    _out(args, {"profile": profile.name, **res.to_dict()}, f"{profile.name}: {res.message}")
    return EXIT_OK if res.ok else EXIT_FAILED


def cmd_restart(args) -> int:
    return _with_profile(args, _restart)


async def _restart(args, profile) -> int:
    sup = _supervisor(args, profile)
    sup.adopt()
    carry = sup.current_runtime()  # N etc. changed at runtime: carried to the new server, as the console's `r`
    res = await sup.stop(grace=args.grace)
    if not res.ok:
        error(f"restart aborted: {res.message}")
        return EXIT_FAILED
    if not args.json:
        print(f"{profile.name}: {res.message}", flush=True)
    try:
        return await _launch(args, profile, sup, runtime=carry)
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE


# ---- supervise ----------------------------------------------------------------------------
def cmd_supervise(args) -> int:
    return _with_profile(args, _supervise)


async def _supervise(args, profile) -> int:
    last: dict = {}
    sup = _supervisor(args, profile, on_change=_reporter(args, profile, last), role=HANDOFF if args.handed_off else "supervise")
    got = await _adopt_or_launch(sup, profile)
    if isinstance(got, int):
        return got
    rec, how = got
    loop = asyncio.get_running_loop()
    detach = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, detach.set)
    watch = asyncio.create_task(sup.watch())
    await asyncio.sleep(0)  # the loop's first step tries the restart lock
    _out(
        args,
        {
            "event": how,
            "profile": profile.name,
            "run": _run_dict(rec),
            "supervising": sup.supervising,
            "supervisor": (lambda w: w.to_json() if w else None)(sup.supervisor_of()),
        },
        f"{how} {profile.name}: pid {rec.pid} on {profile.url}; log {rec.log_path}\n" + _role_line(sup),
    )
    last["supervising"] = sup.supervising
    code = EXIT_OK
    try:
        code = await _until_done(args, profile, sup, detach, watch)
        if detach.is_set() and sup.record is not None:
            running = sup.state in LIVE_STATES
            _out(
                args,
                {
                    "event": "detached",
                    "profile": profile.name,
                    "pid": sup.record.pid,
                    "server_running": running,
                    "state": sup.state,
                    "exit_code": sup.exit_code,
                },
                f"detached; server left running (pid {sup.record.pid})"
                if running
                else f"detached; the server is not running ({sup.state}, {exit_words(sup.exit_code)}; pid {sup.record.pid})",
            )
    finally:
        watch.cancel()
        try:
            await watch
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 (report the loop's crash, keep the server)
            error(f"supervision loop failed: {type(exc).__name__}: {exc}")
            code = EXIT_FAILED
    return code


def _reporter(args, profile, last: dict) -> Callable[[Supervisor], None]:
    """The supervisor's ``on_change``: a line (or a JSON event) per change worth saying;
    ``last`` keeps what was said."""

    def report(sup: Supervisor) -> None:
        key = (
            sup.state,
            sup.restarts,
            sup.record.pid if sup.record else None,
            sup.supervising,
            sup.next_restart_at,
            sup.runtime_note,
        )
        if last.get("key") == key:
            return
        last["key"] = key
        snap = sup.status_json()
        if args.json:
            print(json.dumps({"event": "state", "profile": profile.name, "time": time.time(), **snap}), flush=True)
            return
        bits = [f"{profile.name}: {sup.state}"]
        if snap["pid"]:
            bits.append(f"pid {snap['pid']}")
        if sup.restarts:
            bits.append(f"restarts {sup.restarts}")
        if snap["next_restart_in_s"] is not None:
            bits.append(f"restart in {snap['next_restart_in_s']:g} s")
        if sup.last_error:
            bits.append(sup.last_error)
        line = "  ".join(bits)
        if last.get("line") != line:  # e.g. only `supervising` changed: said below
            last["line"] = line
            print(f"{time.strftime('%H:%M:%S')}  {line}", flush=True)
        _report_note_and_role(sup, profile, last)

    return report


def _report_note_and_role(sup: Supervisor, profile, last: dict) -> None:
    if sup.runtime_note and last.get("note") != sup.runtime_note:  # re-applied (or not) after a restart
        last["note"] = sup.runtime_note
        print(f"{time.strftime('%H:%M:%S')}  {profile.name}: {sup.runtime_note}", flush=True)
    if "supervising" in last and last["supervising"] != sup.supervising:  # after the first words
        last["supervising"] = sup.supervising
        print(
            f"{time.strftime('%H:%M:%S')}  {profile.name}: "
            + ("now supervising (took over the restart lock)" if sup.supervising else "no longer supervising"),
            flush=True,
        )


async def _adopt_or_launch(sup: Supervisor, profile) -> tuple[runs.RunRecord, str] | int:
    """(the run, "adopted" | "launched"), or the exit code of a refused or failed launch (said)."""
    rec = sup.adopt()
    if rec is not None:
        return rec, "adopted"
    try:
        return await sup.launch(), "launched"
    except RunConflict as exc:
        # a lost launch race (another launch or supervise of this profile won): watch
        # that run, as a supervise started a moment later would
        rec = sup.adopt() if exc.record.name == profile.name else None
        if rec is None:
            error(f"refused: {exc}")
            return EXIT_CONFLICT
        return rec, "adopted"
    except ProfileError as exc:
        error(str(exc))
        return EXIT_USAGE
    except (OSError, RuntimeError) as exc:
        error(f"launch failed: {exc}")
        return EXIT_FAILED


async def _until_done(args, profile, sup: Supervisor, detach: asyncio.Event, watch: asyncio.Task) -> int:
    """Wait until detached, FATAL (said, EXIT_FAILED), stopped for ``--linger`` s (said) or
    the watch loop ends."""
    stopped_since: float | None = None
    while not detach.is_set() and not watch.done():
        if sup.state == RunState.FATAL:
            tail = "\n".join(sup.fatal_tail)
            _out(
                args,
                {
                    "event": RunState.FATAL,
                    "profile": profile.name,
                    "reason": sup.fatal_reason,
                    "exit_code": sup.exit_code,
                    "tail": sup.fatal_tail,
                },
                f"FATAL: {sup.fatal_reason}\n--- last {len(sup.fatal_tail)} log lines ---\n{tail}",
            )
            return EXIT_FAILED
        if sup.state == RunState.STOPPED:  # stopped from elsewhere: wait a little for a relaunch
            stopped_since = stopped_since or time.monotonic()
            if time.monotonic() - stopped_since > args.linger:
                _out(
                    args,
                    {"event": RunState.STOPPED, "profile": profile.name},
                    f"{profile.name}: stopped; nothing left to supervise",
                )
                return EXIT_OK
        else:
            stopped_since = None
        try:
            await asyncio.wait_for(detach.wait(), 0.25)
        except TimeoutError:
            pass
    return EXIT_OK


def _role_line(sup: Supervisor) -> str:
    if sup.supervising:
        return "supervising (Ctrl-C detaches and leaves the server running)"
    who = sup.supervisor_of()
    holder = f"{ROLE_WORDS.get(who.kind, who.kind)} pid {who.pid}" if who else "another process"
    return (
        f"watching only: {holder} supervises this run and restarts its crashes; this process "
        "takes over if it stops (Ctrl-C leaves)"
    )


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    common = argparse.ArgumentParser(add_help=False)
    target = common.add_mutually_exclusive_group()
    add_profile_argument(target)
    add_demo_arguments(common, target)
    common.add_argument("--json", action="store_true", help="print JSON")

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
        "--wait",
        type=seconds_where("0 = do not wait"),
        metavar="S",
        nargs="?",
        const=600.0,
        help="wait up to S seconds (default 600) until /health answers",
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

    p = subparsers.add_parser(
        "supervise",
        parents=[common],
        formatter_class=fmt,
        epilog=EPILOGS["supervise"],
        help="adopt or launch, then keep the server alive (no screen)",
    )
    p.add_argument(
        "--linger",
        type=seconds_where("0 = exit at once"),
        default=10.0,
        metavar="S",
        help="after a stop from elsewhere, wait S seconds for a relaunch before exiting",
    )
    p.add_argument(
        "--handed-off",
        action="store_true",
        help="started by a console that quit leaving the server running (the next console takes over)",
    )
    p.set_defaults(func=cmd_supervise)
