"""``python -m server_control.sglang_patch.parse_check``: does SGLang's own parser take a
command line? Run by the launcher with the profile's interpreter, before any server
process exists (``server_control/config/argv_check.py``).

Reads the launch_server arguments as a JSON list on stdin (never on its own command line:
they may hold API keys), installs the patch's import hook (so the patch's flags exist, as
they do in the server), builds the parser exactly as ``sglang.launch_server`` does
(``ServerArgs.add_cli_args``) and parses. Prints one JSON object on stdout:
``{"ok": true}``, ``{"ok": false, "error": "<argparse's message>"}``, or
``{"ok": null, "error": "..."}`` when SGLang's parser cannot be built here at all.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from typing import NoReturn


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _Refused(message)


def build_parser() -> argparse.ArgumentParser:
    """launch_server's parser, with the patch's flags (raises when SGLang is not importable)."""
    from server_control.sglang_patch import hook

    hook.install()
    from sglang.srt.server_args import ServerArgs

    parser = _Parser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    return parser


def check(argv: list[str], parser: argparse.ArgumentParser) -> dict[str, object]:
    sink = io.StringIO()
    try:
        with contextlib.redirect_stderr(sink), contextlib.redirect_stdout(sink):
            parser.parse_args(argv)
    except _Refused as exc:
        return {"ok": False, "error": str(exc)[:2000]}
    except SystemExit:  # --help or --version in the argv
        return {"ok": False, "error": "the command line asks for help or a version, not a server"}
    return {"ok": True}


def _is_argv(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(a, str) for a in value)


def answer(request: object) -> dict[str, object]:
    """A list: one command line's answer. An object ``{"argvs": {name: list}}``: each one's
    answer under its name, and ``"options"``: every option string the parser knows."""
    many = isinstance(request, dict) and isinstance(request.get("argvs"), dict)
    if not (_is_argv(request) or (many and all(_is_argv(v) for v in request["argvs"].values()))):  # type: ignore[index]
        return {"ok": None, "error": 'stdin is neither a JSON list of strings nor {"argvs": {name: list}}'}
    try:
        parser = build_parser()
    except Exception as exc:  # noqa: BLE001 - any failure to build the parser is reported, not raised
        return {"ok": None, "error": f"cannot build SGLang's parser here: {exc!r}"[:2000]}
    if not many:
        return check(request, parser)  # type: ignore[arg-type]
    return {
        "argvs": {name: check(argv, parser) for name, argv in request["argvs"].items()},  # type: ignore[index]
        "options": sorted(parser._option_string_actions),
    }


def main() -> int:
    try:
        request = json.loads(sys.stdin.read(8 << 20))
    except ValueError as exc:
        request = None
        print(json.dumps({"ok": None, "error": f"stdin is not JSON: {exc}"}))
        return 0
    print(json.dumps(answer(request)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
