"""console/cli/main.py builds only the named command's module: its map of commands to
modules must be what the modules register, and a command parsed that way must parse as
it does with every module loaded."""

import argparse
import subprocess
import sys

from console.cli.main import COMMAND_MODULE, COMMAND_MODULES, build_parser
from tests.cli.documented import REPO


def _choices(parser: argparse.ArgumentParser) -> set[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_every_command_maps_to_the_module_that_registers_it():
    # every module of console/cli that registers commands is mapped (a new one is not forgotten)
    registering = {f"console.cli.{f.stem}" for f in (REPO / "console/cli").glob("*.py") if "\ndef register(" in f.read_text()}
    assert registering == set(COMMAND_MODULES), registering ^ set(COMMAND_MODULES)
    assert set(COMMAND_MODULE) == _choices(build_parser())
    for module in COMMAND_MODULES:
        mine = {c for c, m in COMMAND_MODULE.items() if m == module}
        assert _choices(build_parser(module)) == mine, module


def test_one_module_parses_a_command_as_the_whole_parser_does():
    argv = ["threshold", "6", "--url", "http://127.0.0.1:9", "--json"]
    alone = vars(build_parser(COMMAND_MODULE["threshold"]).parse_args(argv))
    whole = vars(build_parser().parse_args(argv))
    assert alone == whole


def test_a_command_imports_its_module_not_the_others():
    code = (
        "import importlib, sys\nmain = importlib.import_module('console.cli.main')\n"
        "try:\n    main.main(['status', '--url', 'http://127.0.0.1:9', '--help'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in main.COMMAND_MODULES if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "['console.cli.status']", out.stdout + out.stderr


def test_an_unknown_command_is_refused_naming_the_commands():
    out = subprocess.run([sys.executable, "-m", "console", "statsu"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "invalid choice: 'statsu'" in out.stderr and "threshold" in out.stderr, out.stderr
