"""`specconsole fleet ...`: a fleet (docs/fleet.md) from one command line.

    specconsole fleet --fleet F                     the fleet screen
    specconsole fleet status --fleet F [--json]     one row per member, and the gateway
    specconsole fleet threshold N|--force MODE --fleet F [--members a,b] [--json]
    specconsole fleet verify --fleet F [--wait S] [--members a,b] [--json]
    specconsole fleet launch --fleet F [--wait S] [--members a,b] [--json]   (the gateway after them)
    specconsole fleet stop --fleet F [--members a,b] [--json]                (the gateway first)
    specconsole demo --fleet                        four simulated replicas behind smg, with traffic
    specconsole fleet status --demo [--json]        (and every action) the demo fleet, where the demo keeps it

The fleet file is `--fleet F` (a path or a shipped fleet's name), else $SPECCONSOLE_FLEET;
`--demo` is the demo fleet in `<state dir>/demo` (or `--state-dir DIR` itself).
Every member is asked at once; each gives one result (ok, pending, refused, failed,
no-answer) and `--json` prints them all. Headless commands never take over supervising.

Exit codes: 0 every member ok; 1 any refused, failed or no answer; 3 any pending (and
none of those); 2 bad fleet file or arguments; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from console.cli.common import UsageError, run_async, usage_error
from server_control.model.vocabulary import RunState
from server_control.protocol.arg_types import seconds_where
from server_control.protocol.decision import validate_force, validate_threshold

EPILOG = "Exit codes: 0 all ok, 1 any refused/failed/no answer, 3 any pending, 2 bad fleet file or arguments, 130 interrupted."
ACTIONS = ("status", "threshold", "verify", "launch", "stop")


def _spec(args):
    from server_control.fleet.spec import FleetError, load_fleet

    if getattr(args, "demo", False):
        spec = _demo_spec(args)
    else:
        where = args.fleet or os.environ.get("SPECCONSOLE_FLEET")
        if not where:
            raise UsageError(
                "which fleet? give --fleet F (a fleet file or a shipped fleet's name), --demo, or set SPECCONSOLE_FLEET"
            )
        try:
            spec = load_fleet(where)
        except FleetError as exc:
            raise UsageError(str(exc)) from None
    names = [n.strip() for n in (args.members or "").split(",") if n.strip()] or None
    unknown = [n for n in names or () if n not in spec.names()]
    if unknown:
        raise UsageError(
            f"--members: no member {', '.join(map(repr, unknown))} in {spec.path} (members: {', '.join(spec.names())})"
        )
    return spec, names


def _demo_spec(args):
    """`--demo`: the demo fleet where `specconsole demo --fleet` keeps it (``<state dir>/demo``,
    or --state-dir DIR itself), its members and gateway on the ports of their live runs."""
    from console.cli.demo_target import demo_state_dir  # noqa: PLC0415
    from server_control.fleet.demo import demo_fleet  # noqa: PLC0415

    if args.fleet:
        raise UsageError("give --fleet F or --demo, not both")
    state = demo_state_dir(args.state_dir)
    args.state_dir = str(state)
    return demo_fleet(state)


def demo_hint(state_dir) -> str:
    """How a headless command reaches the demo fleet in ``state_dir``."""
    from console.cli.demo_target import demo_state_dir  # noqa: PLC0415

    return "specconsole fleet status --demo" + ("" if Path(state_dir) == demo_state_dir() else f" --state-dir {state_dir}")


def _print(args, fleet, action: str, results, code: int) -> None:
    from console.fleet.rows import COLUMNS, cells

    gw = fleet.gateway_status
    if args.json:
        body = {
            "fleet": fleet.spec.name,
            "action": action,
            "exit_code": code,
            "members": [r.to_json() for r in results],
            "gateway": gw.to_json() if gw is not None else None,
        }
        print(json.dumps(body, indent=1, default=str))
        return
    if action == "status":
        shown = [c for c in COLUMNS if c.key not in ("sel", "trend")]  # the trend is a sparkline: screen only
        print("  ".join(f"{c.title:<{c.width}}" for c in shown))
        for row in fleet.rows():
            cell = cells(row, False)
            print(
                "  ".join(f"{str(cell[c.key]):<{c.width}}" for c in shown)
                + (f"  {row.error}" if row.error and not row.reachable else "")
            )
    else:
        for r in results:
            print(f"{r.member:14s} {r.outcome:9s} {r.detail}")
    if gw is not None and gw.state == RunState.STOPPED:
        print(f"gateway {gw.url}: stopped")
    elif gw is not None:
        print(
            f"gateway {gw.url}: {gw.state}, {gw.healthy_workers}/{len(gw.workers)} workers healthy"
            + (f" ({gw.error})" if gw.error else "")
        )
        if gw.traffic is not None:
            print(f"gateway {gw.traffic.words()}")


async def _run(args) -> int:
    from server_control.fleet.fleet import Fleet
    from server_control.fleet.member import exit_code

    spec, names = _spec(args)
    action = args.fleet_command
    value = None
    if action == "threshold" and args.value is None and args.force is None:
        action = "status"  # no N: read every member's (as `threshold` without N reads)
    elif action == "threshold":
        if args.value is not None and args.force is not None:
            raise UsageError("give either N or --force MODE, not both")
        action = "force" if args.force is not None else "threshold"
        try:  # a bad N or MODE is a bad argument, as for one server: one line, exit 2, nothing sent
            value = validate_force(args.force) if args.force is not None else validate_threshold(args.value)
        except ValueError as exc:
            raise UsageError(f"refused: {exc}") from None
    from console.run_supervisor import member_supervisors  # noqa: PLC0415

    fleet = Fleet(spec, args.state_dir, supervise=False, supervisors=member_supervisors)  # a launch: each its own supervisor
    await fleet.start()
    try:
        await fleet.settle()
        wait = getattr(args, "wait", None)
        results = await fleet.act(action, value, names, wait_s=wait)
        await fleet.read_gateway()
    finally:
        await fleet.close()
    code = exit_code(results)
    _print(args, fleet, action, results, code)
    return code


def run(args) -> int:
    if not getattr(args, "fleet_command", None):
        return run_ui(args)
    return run_async(_run, args)


def run_ui(args) -> int:
    """The fleet screen; quitting leaves every server running (the next console adopts them)."""
    from console.run_supervisor import member_supervisors  # noqa: PLC0415
    from server_control.fleet.fleet import Fleet

    try:
        spec, _names = _spec(args)
    except UsageError as exc:
        return usage_error(str(exc))
    from console.fleet.app import FleetApp  # noqa: PLC0415 - textual only when a screen is wanted

    app = FleetApp(Fleet(spec, args.state_dir, supervisors=member_supervisors))
    _run_fleet_app(app, args)
    return app.return_code or 0


def _run_fleet_app(app, args, after: Callable[[], str] | None = None) -> None:
    """Run the fleet screen; when it was left running (`q` then Leave, or the terminal gone)
    say what keeps each member. ``after``: a last line (the demo's traffic)."""
    from console.exit_watchdog import ExitWatchdog  # noqa: PLC0415
    from console.fleet.leaving import supervised_words  # noqa: PLC0415

    app.exit_watchdog = ExitWatchdog()  # a dead terminal: gone in 2 s
    try:
        app.run(mouse=not args.no_mouse)
    finally:
        app.exit_watchdog.finished()
    try:
        if app.leaving:
            print(f"specconsole: the fleet was left running; {supervised_words(app.fleet)}", flush=True)
        if after is not None:
            print(after(), flush=True)
    except OSError:  # the terminal went away (SIGHUP)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115


def demo_app(args):
    """The demo fleet's app: it launches the fleet and its gateway, then sends traffic through
    the gateway; quitting stops it all (unless --keep). Returns (app, traffic)."""
    from console.cli.demo_target import demo_state_dir  # noqa: PLC0415
    from console.fleet.app import FleetApp  # noqa: PLC0415 - textual only when a screen is wanted
    from console.run_supervisor import member_supervisors  # noqa: PLC0415
    from server_control.fleet.demo import GatewayTraffic, demo_fleet
    from server_control.fleet.fleet import Fleet

    state_dir = demo_state_dir(args.state_dir)
    spec = demo_fleet(state_dir, args.time_scale)
    fleet = Fleet(spec, state_dir, supervisors=member_supervisors)
    first = spec.members[0].profile
    if spec.gateway is None or first is None:  # the demo fleet always has both
        raise UsageError("the demo fleet needs a gateway and a local member")
    traffic = GatewayTraffic(spec.gateway.url, first.server["model_path"])

    async def start(app) -> None:
        results = await fleet.act("launch", wait_s=60)
        app.fleet_screen.query_one("#fleet-results").show("launch", results)
        traffic.start()

    async def stop(app) -> None:
        await traffic.stop()
        if not args.keep:
            await fleet.act("stop")

    notice = f"demo fleet state dir {state_dir}; headless: {demo_hint(state_dir)}"
    return FleetApp(fleet, on_start=start, on_exit=stop, stops_on_quit=not args.keep, notice=notice), traffic


def run_demo(args) -> int:
    """`specconsole demo --fleet`: quitting stops the fleet, unless --keep and `q` then Leave
    (each member keeps its own detached supervisor, as after the fleet screen's Leave)."""
    app, traffic = demo_app(args)

    def said() -> str:
        return f"demo fleet: {traffic.sent} requests through the gateway ({traffic.errors} errors); " + (
            "left running" if app.leaving else "stopped"
        )

    _run_fleet_app(app, args, after=said)
    return app.return_code or 0


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--fleet", metavar="F", help="fleet file or shipped name (default $SPECCONSOLE_FLEET)")
    common.add_argument(
        "--demo", action="store_true", help="the demo fleet (`specconsole demo --fleet`) in <state dir>/demo or --state-dir"
    )
    common.add_argument("--members", metavar="A,B", help="only these members (default: all)")
    common.add_argument("--state-dir", metavar="DIR", help="state dir (default $SPECCONSOLE_STATE_DIR or the user's)")
    common.add_argument("--json", action="store_true", help="print JSON: one result per member")

    p = subparsers.add_parser(
        "fleet",
        parents=[common],
        formatter_class=fmt,
        epilog=EPILOG,
        description=__doc__,
        help="many servers and hosts: the fleet screen, or a fleet-wide status/threshold/verify/launch/stop",
    )
    p.add_argument("--no-mouse", action="store_true", help="do not capture the mouse (the screen)")
    p.set_defaults(func=run, fleet_command=None)
    sub = p.add_subparsers(dest="fleet_command", metavar="ACTION")
    for name, helptext in (
        ("status", "one row per member, and the gateway's workers"),
        ("threshold", "set N (or --force MODE) on every member, read back on every rank"),
        ("verify", "the three verification layers on every member"),
        ("launch", "launch every member (and then the gateway)"),
        ("stop", "stop the gateway, then every member"),
    ):
        q = sub.add_parser(name, parents=[common], formatter_class=fmt, epilog=EPILOG, help=helptext)
        q.set_defaults(func=run)
        if name == "threshold":
            q.add_argument("value", nargs="?", metavar="N", help="new threshold (0..4096)")
            q.add_argument("--force", metavar="MODE", help="auto | speculative | target_only")
        if name in ("verify", "launch"):
            q.add_argument(
                "--wait",
                type=seconds_where("0 = do not wait"),
                metavar="S",
                default=60.0 if name == "launch" else None,
                help="launch: until every member answers (default 60 s); verify: while pending",
            )
