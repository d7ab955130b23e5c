"""`specconsole` command line: one subcommand per module in ``console.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning the exit code). Modules are
imported lazily-by-list so a missing optional piece never breaks the others.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMAND_MODULES = (
    "console.commands.ui",        # (default) the TUI on a profile, `demo`, `attach`
    "console.commands.runs",      # launch, stop, restart, status, supervise
    "console.commands.logs",      # logs
    "console.commands.control",   # threshold, verify
    "console.commands.status",    # status (the session snapshot)
    "console.commands.sim",       # sim (the simulated SGLang server)
    "console.commands.bench",     # bench
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="specconsole",
        description="Operator console for SGLang with dynamic speculation disable.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # `specconsole` alone, or `specconsole --profile F`, opens the console.
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["ui", *argv]
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `specconsole logs ... | head`: the reader left; not an error worth a traceback.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
