"""`specconsole supervise`: adopt the profile's run (or launch it), then keep the server
alive without a screen: crashes restarted by whichever supervise holds the restart lock,
the others watch and take over if it stops. See docs/operations.md.

Exit codes: 0 detached (Ctrl-C) or the run was stopped elsewhere; 1 FATAL or the loop
failed; 2 bad profile or arguments; 3 a live run holds the port; 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import signal
import time
from collections.abc import Callable

from console.cli.common import EXIT_CONFLICT, EXIT_FAILED, EXIT_OK, EXIT_USAGE, error
from console.cli.runs import common_parser, out, run_dict, supervisor_for, with_profile
from server_control.config.profile import ProfileError
from server_control.control import server_tune
from server_control.control.settings import Control
from server_control.model.vocabulary import LIVE_STATES, RunState
from server_control.protocol.arg_types import seconds_where, server_port
from server_control.protocol.tuner import parse_bounds
from server_control.state import runs
from server_control.state.runs import RunConflict
from server_control.supervision.health_watch import exit_words
from server_control.supervision.live_tuner import LiveTuner
from server_control.supervision.ownership import HANDOFF, ROLE_WORDS
from server_control.supervision.supervisor import Supervisor
from server_control.supervision.tune_requests import Follower
from server_control.telemetry.http_poll import HttpPoller

EPILOG = (
    "Exit codes: 0 detached (Ctrl-C) or the run was stopped elsewhere, 1 FATAL or the loop "
    "failed, 2 bad profile/arguments, 3 a live run holds the port, 130 interrupted."
)


def cmd_supervise(args) -> int:
    return with_profile(args, _supervise)


async def _supervise(args, profile) -> int:
    if args.port is not None:  # the run's own port: a fleet console moved it off the profile's
        profile = dataclasses.replace(profile, server={**profile.server, "port": args.port})
    last: dict = {}
    sup = supervisor_for(
        args, profile, on_change=_reporter(args, profile, last), role=HANDOFF if args.handed_off else "supervise"
    )
    handed = sup.adopt() if args.handed_off else None
    if args.handed_off and handed is None:
        # handed a run that ended meanwhile (stopped elsewhere): launching here would start
        # a server nobody asked for, left running in a detached process
        out(
            args,
            {"event": "nothing", "profile": profile.name},
            f"{profile.name}: handed off, but the run is not running: nothing to supervise",
        )
        return EXIT_OK
    got = (handed, "adopted") if handed is not None else await _adopt_or_launch(sup, profile)
    if isinstance(got, int):
        return got
    rec, how = got
    loop = asyncio.get_running_loop()
    detach = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, detach.set)
    watch = asyncio.create_task(sup.watch())
    await asyncio.sleep(0)  # the loop's first step tries the restart lock
    tune = _start_tuner(args, profile, sup, detach)
    moves = _follow_server_tune(args, profile, sup, detach)
    out(
        args,
        {
            "event": how,
            "profile": profile.name,
            "run": run_dict(rec),
            "supervising": sup.supervising,
            "cannot_lock": sup.ownership.cannot_lock,
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
            out(
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
        if moves is not None:
            moves.cancel()
            await asyncio.gather(moves, return_exceptions=True)
        if tune is not None:
            tune[0].cancel()
            await asyncio.gather(tune[0], return_exceptions=True)
            await tune[1].aclose()
        watch.cancel()
        try:
            await watch
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # noqa: BLE001 (report the loop's crash, keep the server)
            error(f"supervision loop failed: {type(exc).__name__}: {exc}")
            code = EXIT_FAILED
    return code


def _start_tuner(args, profile, sup: Supervisor, detach: asyncio.Event) -> tuple[asyncio.Task, Control] | None:
    """``--auto-tune LO-HI``: N tuned from the server's curves by this process, once for the
    whole server (server_control/supervision/live_tuner.py), each move said and journaled."""
    if args.auto_tune is None:
        return None
    control = Control(profile.url, profile.api_key(), profile.admin_api_key())
    follow = Follower(sup.state_dir)  # from the journal's end: earlier requests are not this run's
    tuner = LiveTuner(
        profile.url,
        control,
        args.auto_tune,
        api_key=profile.api_key(),
        say=lambda line: out(args, {"event": "auto-tune", "profile": profile.name, "line": line}, line),
        journal=sup.journal,
        asks=lambda: follow.requests(profile.url),  # `specconsole threshold auto`: on again
    )
    return asyncio.create_task(tuner.run(detach, when=lambda: sup.supervising)), control


def _follow_server_tune(args, profile, sup: Supervisor, detach: asyncio.Event) -> asyncio.Task | None:
    """A server that tunes N itself (its flags): its moves journaled once each and said, while
    this process supervises the run (server_control/control/server_tune.py)."""
    try:
        if not server_tune.tunes_itself(profile.server_args()):
            return None
    except ProfileError:
        return None
    watch = server_tune.ServerTuneWatch(profile.url, sup.state_dir, profile.name)
    poller = HttpPoller(profile.url, profile.api_key())

    def say(move: server_tune.ServerMove) -> None:
        out(args, {"event": "server auto-tune", "profile": profile.name, "line": move.line}, move.line)

    async def run() -> None:
        try:
            await server_tune.follow(watch, poller.poll_once, detach, when=lambda: sup.supervising, say=say)
        finally:
            await poller.aclose()

    return asyncio.create_task(run())


def _bounds(text: str):
    try:
        return parse_bounds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


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
            sup.ownership.cannot_lock,
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
    cannot = sup.ownership.cannot_lock
    if "supervising" in last and cannot is not None and last.get("cannot_lock") != cannot:  # after the first words
        print(f"{time.strftime('%H:%M:%S')}  {profile.name}: {cannot}; a crash is said, not restarted", flush=True)
    last["cannot_lock"] = cannot
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
            out(
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
                out(
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
    if sup.ownership.cannot_lock is not None:
        return f"watching only: {sup.ownership.cannot_lock}; a crash is said, not restarted (Ctrl-C leaves)"
    who = sup.supervisor_of()
    holder = f"{ROLE_WORDS.get(who.kind, who.kind)} pid {who.pid}" if who else "another process"
    return (
        f"watching only: {holder} supervises this run and restarts its crashes; this process "
        "takes over if it stops (Ctrl-C leaves)"
    )


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    common = common_parser()
    p = subparsers.add_parser(
        "supervise",
        parents=[common],
        formatter_class=fmt,
        epilog=EPILOG,
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
        "--port",
        type=server_port,
        default=None,
        metavar="N",
        help="the run's port instead of the profile's (a fleet console that moved a member off a busy port hands it off so)",
    )
    p.add_argument(
        "--handed-off",
        action="store_true",
        help="started by a console that quit leaving the server running (the next console takes over)",
    )
    p.add_argument(
        "--auto-tune",
        type=_bounds,
        default=None,
        metavar="LO-HI",
        help="tune the threshold from the server's own cost curves within LO..HI (moves said and "
        "journaled; an operator's threshold turns it off, `specconsole threshold auto` back on)",
    )
    p.set_defaults(func=cmd_supervise)
