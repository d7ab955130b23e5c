"""`specconsole setting [NAME [VALUE]]`: every runtime setting of the switch, one by name,
or set one on every rank.

The settings are the rows of ``server_control/protocol/runtime_settings.py`` (threshold,
hysteresis, dwell, force): NAME is a row's word (or its server-argument name). Without NAME
it prints each setting as every DP rank reads it; with VALUE it validates here (a bad value
is refused with the reason, nothing sent), sends it through /set_internal_state, and
confirms it on every rank, journaled like `specconsole threshold` (whose N and --force are
two of these settings).
  Exit codes: 0 read / applied; 1 refused by the server, unsupported (stock SGLang), error;
  2 bad arguments (an unknown NAME or an invalid VALUE: nothing is sent); 5 no answer at the
  server's URL; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UsageError,
    add_target_arguments,
    answered_nothing,
    error,
    open_session,
    run_async,
    settle,
    unreachable_hint,
)
from console.cli.control import ranks_text
from server_control.model.vocabulary import ChangeState
from server_control.protocol import runtime_settings
from server_control.protocol.runtime_settings import RuntimeSetting

EPILOG = (
    "Exit codes: 0 read/applied, 1 refused by the server/unsupported/error, 2 bad arguments "
    "(an unknown NAME or an invalid VALUE: nothing is sent), 5 no answer at the server's URL, 130 interrupted."
)


def _named(name: str) -> RuntimeSetting:
    setting = runtime_settings.by_word(name)
    if setting is None:
        words = ", ".join(s.word for s in runtime_settings.SETTINGS)
        raise UsageError(f"refused: no runtime setting {name!r} (one of: {words})")
    return setting


def _values(values: object) -> str:
    """[8, 8] -> '8, 8'; a missing value as '?'."""
    if not isinstance(values, list):
        return "?"
    return ", ".join("?" if v is None else str(v) for v in values) or "?"


def settings_text(got: dict[str, object], only: RuntimeSetting | None) -> str:
    per_word = got.get("settings")
    per_word = per_word if isinstance(per_word, dict) else {}
    shown = [s for s in runtime_settings.SETTINGS if only is None or s is only]
    lines = [f"{s.word} per DP rank: {_values(per_word.get(s.word))}" for s in shown]
    if not got.get("supported"):
        lines.append("runtime changes NOT supported (stock SGLang?)")
    return "\n".join(lines)


async def _setting(args: argparse.Namespace) -> int:
    setting = _named(args.name) if args.name is not None else None
    valid: object = None
    if setting is not None and args.value is not None:
        try:  # a bad VALUE is a bad argument (exit 2, nothing sent)
            valid = setting.validate(args.value)
        except ValueError as exc:
            raise UsageError(f"refused: {exc}") from None
    session = open_session(args)
    await session.start()
    try:
        await settle(session, timeout_s=2.0)  # one poll (is it this run's server?); the log read
        if setting is None or args.value is None:
            if session.foreign is not None:
                error(unreachable_hint(session.url, session))
                return EXIT_FAILED
            got = await session.read_settings()
            if "error" in got:
                print(json.dumps(got, indent=1) if args.json else f"error: {got['error']}")
                error(unreachable_hint(session.url, session))
                return EXIT_UNREACHABLE if answered_nothing(session) else EXIT_FAILED
            if args.json:
                raw = got.get("settings")
                words = raw if isinstance(raw, dict) else {}
                picked = {s.word: words.get(s.word) for s in runtime_settings.SETTINGS if setting is None or s is setting}
                print(json.dumps({"settings": picked, "supported": got.get("supported")}, indent=1))
            else:
                print(settings_text(got, setting))
            return EXIT_OK
        result = await session.set_setting(setting.key, valid)
        change = result.change
        if change is None:
            print(result.message)
            return EXIT_FAILED
        if args.json:
            print(json.dumps(change.to_json(), indent=1))
        else:
            print(f"{change.state}: {change.detail}" + (f" ({ranks_text(change.ranks)})" if change.ranks else ""))
        if change.state == ChangeState.ERROR and not (session.last and session.last.reachable):
            error(unreachable_hint(session.url, session))
            if answered_nothing(session):
                return EXIT_UNREACHABLE
        return EXIT_OK if result.done else EXIT_FAILED
    finally:
        await session.close()


def cmd_setting(args: argparse.Namespace) -> int:
    return run_async(_setting, args)


def register(subparsers) -> None:
    rows = "\n".join(f"  {s.word:<11} {s.help} (default {s.default})" for s in runtime_settings.SETTINGS)
    p = subparsers.add_parser(
        "setting",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read the switch's runtime settings, or set one on every rank.\n\nNAME is one of:\n" + rows,
        epilog=EPILOG,
        help="read every runtime setting (threshold, hysteresis, dwell, force), or set one on every rank",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="a setting (see above); omit to read them all")
    p.add_argument("value", nargs="?", metavar="VALUE", help="its new value; omit to read it")
    add_target_arguments(p)
    p.set_defaults(func=cmd_setting)
