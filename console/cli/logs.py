"""`specconsole logs [FILE | --profile F | --demo] [-f] [-n N] [--grep RE] [--invert] [--kind K] [--rank R] [--parse] [--json]`

Prints a server log's records, filtered; `--parse --json` prints one JSON object per
record (the log record contract, docs/logs.md). `-n N`: only the last N (that match);
`--follow` starts from the last 10, like tail -f (`-n all`: from the start). `--profile F` / `--demo` (with
`--state-dir`, as the other commands): that run's log (the run record's, else the newest
log the profile's runs wrote). Without any of them: the newest run log under the state
directory (server_control.state.state_dir: `$SPECCONSOLE_STATE_DIR` or the platform's user state
dir; `logs/<profile>/*.log`, and the demo's `demo/logs/demo/*.log`).

Exit codes: 0 done (also when nothing matched), 1 the file cannot be read,
2 bad arguments (bad regex, unknown kind, no FILE and no run log found), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import signal
import sys
from pathlib import Path

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_demo_arguments,
    add_profile_argument,
    error,
)
from server_control.logs import KINDS, LogPipeline, LogStore, iter_file
from server_control.logs.json_lines import json_lines
from server_control.logs.parse import records_from_columns
from server_control.logs.store import record_matcher
from server_control.state.state_dir import resolve_state_dir

PREFIX = "specconsole logs"


def state_dir() -> Path:
    return resolve_state_dir(create=False)  # reading logs never creates the state dir


def latest_run_log(base: Path | None = None) -> Path | None:
    """The most recently modified ``logs/*/*.log`` under the state dir (and under the demo's
    own state dir, ``demo/``), or None."""
    root = base or state_dir()
    try:
        candidates = [
            p
            for d in (root / "logs", root / "demo" / "logs")
            for p in d.glob("*/*.log")
            if p.is_file() and not p.name.startswith("supervise-")
        ]
    except OSError:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime, default=None)


def profile_log(args) -> Path | None:
    """The log of --profile F / --demo: the run record's (live or not), else the newest log
    its runs left (the run-log manifest), else None."""
    from console.cli.common import target_profile  # noqa: PLC0415
    from server_control.state import runs  # noqa: PLC0415
    from server_control.state.run_logs import read_manifest  # noqa: PLC0415

    profile, sd = target_profile(args)
    try:
        rec = runs.load_record(profile.name, sd)
    except runs.RunRecordError:
        rec = None
    if rec is not None:
        return Path(rec.log_path)
    listed = [Path(p) for p in read_manifest(runs.log_manifest(profile.name, sd)) if Path(p).is_file()]
    return max(listed, key=lambda p: p.stat().st_mtime, default=None)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "logs",
        help="print or follow a server log, filtered; --parse --json for records",
        description=__doc__.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Exit codes: 0 done, 1 file cannot be read, 2 bad arguments, 130 interrupted.",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="log file (default: the newest run log in the state directory)")
    target = p.add_mutually_exclusive_group()
    add_profile_argument(target)
    add_demo_arguments(p, target)
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep following (tail -F: waits for the file, survives rotation and truncation)",
    )
    p.add_argument(
        "-n",
        "--lines",
        metavar="N",
        type=_lines,
        default=None,
        help=f"only the last N records (that match) before following; 'all' for every one "
        f"(default: all, and with --follow the last {FOLLOW_LINES}, like tail -f)",
    )
    p.add_argument("--grep", metavar="RE", help="only records whose line matches this regex")
    p.add_argument("--invert", action="store_true", help="only records that do NOT match --grep")
    p.add_argument(
        "--kind", metavar="K", action="append", help=f"only these kinds (repeat or comma-separate): {', '.join(KINDS)}"
    )
    p.add_argument("--rank", metavar="R", help='only this rank, e.g. "TP0" or "DP1 TP1"')
    p.add_argument("--parse", action="store_true", help="print records (line, kind, text) instead of the raw lines")
    p.add_argument("--json", action="store_true", help="with --parse: one JSON object per record (implies --parse)")
    p.set_defaults(func=run)


FOLLOW_LINES = 10  # what -f shows of the file before following, as tail -f does


ALL = -1  # ``-n all``


def _lines(text: str) -> int:
    """``-n``: a count >= 0, or ``all`` (``ALL``: every record)."""
    if text.strip().lower() == "all":
        return ALL
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of records >= 0 or 'all', got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be a number of records >= 0 or 'all', got {text!r}")
    return n


def json_lines_encoder():
    """``encode(list of dicts) -> bytes``: one JSON object per line, UTF-8 (not \\u-escaped).
    msgspec's encoder in C (7x the standard library's here: docs/logs.md); the standard
    library's where msgspec is missing."""
    try:
        if os.environ.get("SPECCONSOLE_JSON") == "std":  # the benchmark's "before" arm
            raise ImportError("the standard library's encoder asked for")
        import msgspec  # noqa: PLC0415
    except ImportError:
        std = json.JSONEncoder(ensure_ascii=False).encode
        return lambda objs: "".join(std(o) + "\n" for o in objs).encode("utf-8", "replace")
    return msgspec.json.Encoder().encode_lines


def msgspec_encoder():
    """msgspec's ``encode(obj) -> bytes`` (None without msgspec, or in the benchmark's "before" arm)."""
    if os.environ.get("SPECCONSOLE_JSON") in ("std", "records"):
        return None
    try:
        import msgspec  # noqa: PLC0415
    except ImportError:
        return None
    return msgspec.json.Encoder().encode


class _Printer:
    def __init__(self, args, out) -> None:
        self.out = out
        self.json = args.json
        self.parse = args.parse or args.json
        self.encode = json.JSONEncoder(ensure_ascii=False).encode
        self.encode_lines = json_lines_encoder()
        self.encode_one = msgspec_encoder()

    def format(self, rec) -> str:
        if self.json:
            return self.encode(rec.to_json())
        if self.parse:
            return f"{rec.line:>7} {rec.kind:<11} {rec.raw}"
        return rec.raw

    def write(self, records) -> None:
        if records and self.json:
            self.out.write(self.encode_lines([r.to_json() for r in records]))
            self.out.flush()
        elif records:
            self.out.write(("\n".join(map(self.format, records)) + "\n").encode("utf-8", "replace"))
            self.out.flush()


def run(args) -> int:
    if args.invert and not args.grep:
        error("--invert needs --grep RE", PREFIX)
        return EXIT_USAGE
    kinds = ",".join(args.kind) if args.kind else None
    try:
        matches = record_matcher(args.grep, args.invert, kinds, args.rank)
    except ValueError as exc:
        error(str(exc), PREFIX)
        return EXIT_USAGE
    if args.file and (args.profile or args.demo):
        error("give FILE or --profile F / --demo, not both", PREFIX)
        return EXIT_USAGE
    if args.profile or args.demo:
        try:
            path = profile_log(args)
        except (UsageError, OSError) as exc:
            error(str(exc), PREFIX)
            return EXIT_USAGE
        if path is None:
            error(f"no log of {'the demo' if args.demo else args.profile} yet (never launched in this state dir)", PREFIX)
            return EXIT_FAILED
    else:
        path = Path(args.file) if args.file else latest_run_log()
    if path is None:
        error(f"no FILE given and no run log found under {state_dir() / 'logs'}", PREFIX)
        return EXIT_USAGE
    if path.exists() and not path.is_file():
        error(f"{path} is not a regular file", PREFIX)
        return EXIT_FAILED
    printer = _Printer(args, sys.stdout.buffer)
    try:
        if args.lines is None:  # not given: all, and with --follow the last FOLLOW_LINES
            last = FOLLOW_LINES if args.follow else None
        else:
            last = None if args.lines == ALL else args.lines
        if args.follow:
            return asyncio.run(_follow(path, matches, printer, last))
        if last is not None:
            _print_last(path, printer, matches, last)
        else:
            _print_file(path, printer, matches, filtered=bool(args.grep or kinds or args.rank))
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_OK
    except IsADirectoryError:
        error(f"{path} is a directory, not a log file", PREFIX)
        return EXIT_FAILED
    except OSError as exc:
        error(f"cannot read {path}: {exc.strerror or exc}", PREFIX)
        return EXIT_FAILED
    return EXIT_OK


def _print_file(path: Path, printer: _Printer, matches, filtered: bool) -> None:
    """Every record of ``path`` that ``matches``; JSON with no filter by the fast JSON lines
    (server_control/logs/json_lines.py)."""
    if printer.json and not filtered and printer.encode_one is not None:
        # A batch holds ~30k match objects at once, and the cyclic collector would walk
        # them over and over (~1/3 of the time); this loop makes no reference cycles.
        gc.disable()
        try:
            for chunk in json_lines(iter_file(path), printer.encode_one):
                printer.out.write(chunk)
        finally:
            gc.enable()
        printer.out.flush()
        return
    for columns in iter_file(path):
        printer.write([r for r in records_from_columns(*columns) if matches(r)])


def _print_last(path: Path, printer: _Printer, matches, last: int) -> None:
    """The last ``last`` records of ``path`` that ``matches``."""
    kept: collections.deque = collections.deque(maxlen=last)
    for columns in iter_file(path):
        kept.extend(r for r in records_from_columns(*columns) if matches(r))
    printer.write(list(kept))


async def _follow(path: Path, matches, printer: _Printer, last: int | None = None) -> int:
    """Follow ``path``; of what it already holds only the last ``last`` matching records
    (None: all), then every new one."""
    store = LogStore()
    seen = 0
    backlog: collections.deque | None = collections.deque(maxlen=last) if last is not None else None

    def on_records(last_seq: int) -> None:
        nonlocal seen
        fresh = [r for r in store.since(seen) if matches(r)]
        seen = last_seq
        if backlog is not None:
            backlog.extend(fresh)
        else:
            printer.write(fresh)

    pipeline = LogPipeline(path, store, on_records)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP):  # before anything is printed: a reader may end us then
        try:
            loop.add_signal_handler(sig, pipeline.stop)
        except (NotImplementedError, RuntimeError):
            pass
    while backlog is not None and pipeline.step():  # what the file holds now, read to its end
        pass
    if backlog is not None:
        held, backlog = list(backlog), None
        printer.write(held)
    if not path.exists():
        error(f"waiting for {path} to appear", PREFIX)
    await pipeline.run()
    return 0


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
