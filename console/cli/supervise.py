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

from console.cli.answer_pipe import AnswerPipe
from console.cli.common import EXIT_CONFLICT, EXIT_FAILED, EXIT_OK, EXIT_USAGE, error
from console.cli.runs import common_parser, out, run_dict, supervisor_for, with_profile
from console.cli.supervise_words import reporter, role_line
from server_control.config.profile import ProfileError
from server_control.control import server_tune
from server_control.control.settings import Control
from server_control.model.vocabulary import LIVE_STATES, RunState
from server_control.protocol.arg_types import positive, seconds_where, server_port
from server_control.protocol.tuner import parse_bounds
from server_control.state import runs
from server_control.state.runs import RunConflict
from server_control.supervision.health_watch import exit_words
from server_control.supervision.live_tuner import LiveTuner
from server_control.supervision.ownership import RUN
from server_control.supervision.supervisor import Supervisor
from server_control.supervision.tune_requests import Follower
from server_control.telemetry.http_poll import HttpPoller

EPILOG = (
    "Exit codes: 0 detached (Ctrl-C) or the run was stopped elsewhere, 1 FATAL or the loop "
    "failed, 2 bad profile/arguments, 3 a live run holds the port, 130 interrupted."
)


def cmd_supervise(args) -> int:
    answer = AnswerPipe.open(args.answer_fd)
    try:
        return with_profile(args, lambda a, p: _supervise(a, p, answer))
    finally:
        answer.close()


async def _supervise(args, profile, answer: AnswerPipe | None = None) -> int:
    if args.port is not None:  # the run's own port: the demo's free one, a fleet member moved off a busy one
        profile = dataclasses.replace(profile, server={**profile.server, "port": args.port})
    if args.time_scale is not None:  # the simulator's, as the console that started this one had it
        if profile.kind != "sim":
            error(f"--time-scale is the simulator's; profile {profile.name!r} runs {profile.kind}")
            return EXIT_USAGE
        profile = dataclasses.replace(profile, sim={**profile.sim, "time_scale": args.time_scale})
    if args.launch_only and args.adopt_only:
        error("--launch-only and --adopt-only exclude each other")
        return EXIT_USAGE
    # Ctrl-C, SIGTERM, SIGHUP detach from here on (a signal during the adopt or the launch
    # too: said once the loop below sees it; the default handlers would be lost in the loop)
    loop = asyncio.get_running_loop()
    detach = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, detach.set)
    last: dict = {}
    sup = supervisor_for(args, profile, on_change=reporter(args, profile, last), role=RUN if args.detached else "supervise")
    found = sup.adopt()
    # the restart lock before any launch: the record then names this process as the run's
    # supervisor before the server starts
    sup.ownership.try_lock()
    if args.adopt_only and found is None:
        # the run ended meanwhile (stopped elsewhere): launching here would start a server
        # nobody asked for, left running in a detached process
        out(
            args,
            {"event": "nothing", "profile": profile.name},
            f"{profile.name}: the run is not running: nothing to supervise",
        )
        return EXIT_OK
    if args.launch_only and found is not None:  # a launch asked of a run's new supervisor: refused, as `launch` is
        error(f"refused: profile {profile.name!r} is already running: pid {found.pid} on {found.host}:{found.port}")
        return EXIT_CONFLICT
    got = (found, "adopted") if found is not None else await _adopt_or_launch(sup, profile, adopt=not args.launch_only)
    if isinstance(got, int):
        return got
    rec, how = got
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
        f"{how} {profile.name}: pid {rec.pid} on {profile.url}; log {rec.log_path}\n" + role_line(sup),
    )
    if answer is not None:
        answer.answered(json.dumps({"event": how, "profile": profile.name, "pid": rec.pid}))
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


async def _adopt_or_launch(sup: Supervisor, profile, adopt: bool = True) -> tuple[runs.RunRecord, str] | int:
    """(the run, "adopted" | "launched"), or the exit code of a refused or failed launch
    (said). ``adopt`` False (``--launch-only``): a run that won a launch race is a refusal."""
    rec = sup.adopt()
    if rec is not None:
        return rec, "adopted"
    try:
        return await sup.launch(), "launched"
    except RunConflict as exc:
        # a lost launch race (another launch or supervise of this profile won): watch
        # that run, as a supervise started a moment later would
        rec = sup.adopt() if adopt and exc.record.name == profile.name else None
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


LIFETIME_ENV = "SPECCONSOLE_SUPERVISE_MAX_S"  # a bound on a supervise's life (the test suite sets it: no leaks)


def _lifetime_end() -> float | None:
    """When ``$SPECCONSOLE_SUPERVISE_MAX_S`` (seconds, if set and valid) ends this process's
    supervision (monotonic), or None."""
    import os  # noqa: PLC0415

    try:
        limit = float(os.environ.get(LIFETIME_ENV, ""))
    except ValueError:
        return None
    return time.monotonic() + limit if limit > 0 else None


async def _until_done(args, profile, sup: Supervisor, detach: asyncio.Event, watch: asyncio.Task) -> int:
    """Wait until detached, FATAL (said, EXIT_FAILED), stopped for ``--linger`` s (said) or
    the watch loop ends."""
    stopped_since: float | None = None
    ends_at = _lifetime_end()
    while not detach.is_set() and not watch.done():
        if ends_at is not None and time.monotonic() > ends_at:
            out(args, {"event": "lifetime", "profile": profile.name}, f"{profile.name}: {LIFETIME_ENV} reached: detaching")
            detach.set()
            break
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
        "--detached",
        action="store_true",
        help="this is the run's own supervisor, started detached by a console or `launch` (status says so)",
    )
    p.add_argument(
        "--answer-fd",
        type=int,
        default=None,
        metavar="N",
        help=argparse.SUPPRESS,  # console/run_supervisor.py: the first answer also on this fd, then closed
    )
    p.add_argument(
        "--launch-only",
        action="store_true",
        help="launch the run, never adopt one (a live run: refused, exit 3, as `launch` is)",
    )
    p.add_argument(
        "--adopt-only",
        action="store_true",
        help="supervise the live run, never launch one (exit 0, saying so, when none runs)",
    )
    p.add_argument(
        "--time-scale",
        type=positive,
        default=None,
        metavar="X",
        help="a simulator profile's time scale for the launches and restarts of this run",
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
