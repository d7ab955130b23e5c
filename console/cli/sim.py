"""`specconsole sim ...`: run the simulated SGLang server with launch_server flags."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "sim",
        help="run the simulated SGLang 0.5.23 server",
        description="Run the simulated SGLang server; every argument goes to the simulator "
        "(`specconsole sim --help` lists them).",
        add_help=False,
        prefix_chars="+",
    )  # no options of its own: every "-x" is passed on
    p.add_argument("sim_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args) -> int:
    from server_control.sim.server import main

    rest = list(args.sim_args)
    if rest and rest[0] == "--":
        rest = rest[1:]
    try:
        return main(rest, prog="specconsole sim")
    except SystemExit as exc:  # argparse errors (2) and bind errors keep their meaning
        if isinstance(exc.code, str):
            import sys

            print(exc.code, file=sys.stderr)
            return 1
        return exc.code or 0
