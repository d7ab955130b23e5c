"""`specconsole` command line: one module per command group in ``console.cli``; what they
share (exit codes, the error printer, --profile/--url) is in ``console.cli.common``.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``func`` (a callable taking the parsed args and returning the exit code). Modules are
imported lazily-by-list so a missing optional piece never breaks the others.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from console.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, error
from console.cli.json_failure import JsonFailure
from server_control.state.state_dir import StateDirError

# Each command and the module that registers it: `specconsole status ...` builds only that
# module's parsers (importing every command module costs ~0.3 CPU-s; one, 0.14-0.23).
# tests/cli/test_parser_modules.py checks this against what each module registers.
COMMAND_MODULE = {
    "ui": "console.cli.ui",  # (default) the TUI on a profile
    "demo": "console.cli.ui",
    "attach": "console.cli.ui",
    "launch": "console.cli.runs",
    "stop": "console.cli.runs",
    "restart": "console.cli.runs",
    "supervise": "console.cli.supervise",
    "logs": "console.cli.logs",
    "threshold": "console.cli.control",
    "verify": "console.cli.control",
    "setting": "console.cli.setting",  # every runtime setting (threshold, hysteresis, dwell, force)
    "status": "console.cli.status",  # the session snapshot
    "sim": "console.cli.sim",  # the simulated SGLang server
    "bench": "console.cli.bench",
    "advise": "console.cli.advise",  # the threshold the cost curves suggest
    "fleet": "console.cli.fleet",  # status, threshold, verify, launch, stop; the fleet screen
    "journal": "console.cli.journal",  # who changed what, when, and how it went
    "patch": "console.cli.patch",  # install / uninstall / status (a .pth in an SGLang env)
}
# every command module once, in the order `--help` lists their commands
COMMAND_MODULES = tuple(dict.fromkeys(COMMAND_MODULE.values()))


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; ``only`` (a module of COMMAND_MODULE): that module's commands alone."""
    parser = argparse.ArgumentParser(
        prog="specconsole",
        description="Operator console for SGLang with dynamic speculation disable.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if only is None else (only,):
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
    failure = JsonFailure(argv)  # --json: a failure that wrote nothing says why on stdout too
    failure.watch()
    try:
        code = _run(argv)
    except SystemExit as exc:  # argparse's usage error (2) or --help (0)
        failure.report(exc.code if isinstance(exc.code, int) else EXIT_USAGE)
        raise
    return failure.report(code)


def _run(argv: list[str]) -> int:
    # `specconsole` alone, or `specconsole --profile F`, opens the console.
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["ui", *argv]
    parser = build_parser(COMMAND_MODULE.get(argv[0]))  # an unknown command: all, for its error
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except StateDirError as exc:  # an unsafe state dir: refused, with how to fix it
        error(str(exc))
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # `specconsole logs ... | head`: the reader left; not an error worth a traceback.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
