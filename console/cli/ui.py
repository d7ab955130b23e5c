"""The console commands: `ui` (the default), `demo`, `attach`.

    specconsole [--profile F] [--no-mouse]        adopt the profile's running server, or
                                                  offer to launch it (default: $SPECCONSOLE_PROFILE,
                                                  else the shipped demo profile)
    specconsole demo [--port N] [--time-scale X]  the simulator (assets/profiles/demo.toml)
                                                  launched through the supervisor, wave traffic
                                                  that crosses the threshold
    specconsole attach URL [--log FILE] [--api-key-env NAME]
                                                  a server someone else started: observe and
                                                  steer, never launch or stop

Demo choices: its runs live in `<state dir>/demo` (so they never collide with a real
profile's run record, lock or logs); if the profile's port is busy it takes a free one and
says so; an already running demo simulator is adopted on its own port; the screen names
the demo's state dir and how headless commands reach it (`specconsole status --demo`);
quitting asks whether to stop the simulator too, and Enter leaves it running (as for `ui`:
Enter never stops a server; `s` stops it); `specconsole stop --demo` stops it later.

Supervision never lives in the console: every run it launches starts under its own detached
`specconsole supervise` (console/run_supervisor.py), which restarts a crash whether or not a
console is open; a console finding a live run without one starts one and says so. Quitting,
a closed terminal (SIGHUP) or a killed console end only the view.

Exit codes: 0 normal quit; 2 bad profile, arguments or missing API-key variable.
"""

from __future__ import annotations

import argparse
import os
import sys

from console.cli.common import (
    EXIT_OK,
    UsageError,
    add_key_env_arguments,
    add_profile_argument,
    check_url,
    key_from_env,
    load_profile_arg,
    usage_error,
)
from console.cli.demo_target import demo_state_dir, demo_target
from server_control.protocol.arg_types import positive


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-mouse", action="store_true", help="do not capture the mouse (less traffic over SSH; every action has a key)"
    )
    p.add_argument(
        "--mouse-motion", action="store_true", help="also report mouse motion (hover); off by default: clicks and the wheel only"
    )


def register(subparsers) -> None:
    ui = subparsers.add_parser(
        "ui",
        help="the console on a profile (default command)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_profile_argument(ui)
    ui.add_argument("--state-dir", metavar="DIR", help="state dir (default $SPECCONSOLE_STATE_DIR or the user's)")
    _add_common(ui)
    ui.set_defaults(func=run_ui)

    demo = subparsers.add_parser(
        "demo",
        help="the console on the simulator with traffic that crosses the threshold",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument(
        "--port",
        type=int,
        metavar="N",
        help="port of the single-server demo (default: the profile's, or a free one if busy; not with --fleet)",
    )
    demo.add_argument(
        "--time-scale",
        type=positive,
        default=1.0,
        metavar="X",
        help="simulated seconds per wall-clock second (default 1; try 5 for a quick tour)",
    )
    demo.add_argument("--state-dir", metavar="DIR", help="demo state dir (default <state dir>/demo)")
    demo.add_argument(
        "--fleet", action="store_true", help="the demo fleet: four simulated replicas behind SGLang's gateway, traffic through it"
    )
    demo.add_argument("--keep", action="store_true", help="with --fleet: leave the fleet running on quit")
    _add_common(demo)
    demo.set_defaults(func=run_demo)

    attach = subparsers.add_parser(
        "attach",
        help="the console on a server someone else started",
        description=(
            "The console on a server someone else started (nothing is launched or restarted): "
            "its state from /server_info and /metrics, N steered at runtime, its log followed "
            "with --log."
        ),
    )
    attach.add_argument("url", help="the server, e.g. http://127.0.0.1:30000")
    attach.add_argument("--log", metavar="FILE", help="the server's log file, to follow")
    add_key_env_arguments(attach, defaults=False)
    _add_common(attach)
    attach.set_defaults(func=run_attach)


def _run_app(session, args, after: str = "", **kwargs) -> int:
    """Run the screen; then print its farewell (and ``after`` when the server was left running)."""
    from console.app import SpecConsoleApp  # noqa: PLC0415 - textual only when a screen is wanted
    from console.exit_watchdog import ExitWatchdog  # noqa: PLC0415

    app = SpecConsoleApp(session, remember_theme=True, mouse_motion=args.mouse_motion, **kwargs)
    app.exit_watchdog = ExitWatchdog()  # a dead terminal: gone in 2 s
    try:
        app.run(mouse=not args.no_mouse)
    finally:  # also when the terminal went away (SIGHUP: console/hangup.py) and drawing failed
        app.exit_watchdog.finished()
    try:
        if app.farewell:
            print(app.farewell + (f"; {after}" if after and "left running" in app.farewell else ""), flush=True)
    except OSError:  # no terminal left to say it on
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the interpreter's final flush must not fail
    return app.return_code or EXIT_OK


def console_session(profile, state_dir):
    """A console's session on ``profile``'s run: a client of the run's own detached
    supervisor (console/run_supervisor.py)."""
    from console.run_supervisor import DetachedSupervisors  # noqa: PLC0415
    from server_control.session.session import Session  # noqa: PLC0415

    supervisors = DetachedSupervisors.for_profile(profile, state_dir)
    if isinstance(supervisors, str):  # never for a profile loaded from its file
        raise OSError(f"no detached supervisor can run profile {profile.name!r}: {supervisors}")
    return Session.for_profile(profile, state_dir=state_dir, supervisors=supervisors)


def run_ui(args) -> int:
    from server_control.config.profile import ProfileError
    from server_control.state.state_dir import resolve_state_dir

    try:
        profile = load_profile_arg(args.profile)
        session = console_session(profile, resolve_state_dir(args.state_dir))
    except (ProfileError, OSError, UsageError) as exc:
        return usage_error(str(exc))
    return _run_app(session, args, what="server", launch="offer")


def run_demo(args) -> int:
    from server_control.config.profile import ProfileError

    if args.time_scale <= 0:
        return usage_error(f"--time-scale must be > 0, got {args.time_scale}")
    if args.fleet and args.port is not None:
        return usage_error("--port is the single server's; the demo fleet takes free ports for its members and gateway")
    if args.keep and not args.fleet:
        return usage_error("--keep is for --fleet: it leaves the demo fleet running on quit")
    if args.fleet:
        from console.cli.fleet import run_demo as run_fleet_demo

        return run_fleet_demo(args)
    if args.port is not None and not 1 <= args.port <= 65535:
        return usage_error(f"--port must be 1..65535, got {args.port}")
    try:
        target = demo_target(demo_state_dir(args.state_dir), args.port, args.time_scale)
        session = console_session(target.profile, target.state_dir)
    except (ProfileError, OSError) as exc:
        return usage_error(str(exc))
    notice = "; ".join(filter(None, [target.note, f"demo state dir {target.state_dir}; headless: {target.hint()}"]))
    return _run_app(
        session,
        args,
        what="simulator",
        launch="auto",
        notice=notice,
        after=f"stop it with: {target.hint().replace('status', 'stop')}",
    )


def run_attach(args) -> int:
    from server_control.session.session import Session

    try:
        check_url(args.url, "URL")
        key = key_from_env(args.api_key_env, "--api-key-env", required=True)
        admin = key_from_env(args.admin_api_key_env, "--admin-api-key-env", required=True)
    except UsageError as exc:
        return usage_error(str(exc))
    session = Session.attach(args.url, log_path=args.log, api_key=key, admin_api_key=admin)
    return _run_app(session, args, what="server", launch="never", notice=log_notice(args.log))


def log_notice(path: str | None) -> str:
    """What the operator must know about ``--log`` (shown on the screen, not under it)."""
    if path and not os.path.exists(path):
        return f"log {path} does not exist (yet): the log view stays empty until it appears"
    return ""
