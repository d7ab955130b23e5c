"""`specconsole journal`: the operator journal of the state dir (server_control/state/journal.py):
who changed what on which server, and how it went, oldest first.

    specconsole journal [--profile F | --url URL | --demo] [--state-dir DIR] [-n N] [--json]

With --profile (or --demo) only that profile's entries, with --url only that server's;
with none of them every entry of the state dir. A runtime change shows once, with its
result (its "pending" and "read back" steps only while it is still in flight; --steps
shows them all).

With no entries (none yet, or none for the filter) the text form says so in one line on
stderr; --json prints no line (JSON lines: none is an empty stream).

Exit codes: 0 printed (an empty journal too, or none yet); 1 the journal file cannot be read
(not a regular file, over its size cap, no permission: said in one line); 2 bad arguments;
130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys

from console.cli.common import (
    EXIT_OK,
    UsageError,
    add_demo_arguments,
    add_profile_argument,
    check_url,
    target_profile,
    usage_error,
)
from server_control.state import journal

EPILOG = "Exit codes: 0 printed, 1 the journal cannot be read, 2 bad arguments, 130 interrupted."
EXIT_UNREADABLE = 1
STEPS = journal.STEPS


def collapse(entries: list[journal.Entry]) -> list[journal.Entry]:
    """Each runtime change once: its result; its last step while it has none yet."""
    final = {e.op for e in entries if e.op and e.result not in STEPS}
    last_step = {e.op: e for e in entries if e.op and e.op not in final}
    return [
        e
        for e in entries
        if not e.op or (e.op in final and e.result not in STEPS) or (e.op not in final and last_step.get(e.op) is e)
    ]


def cmd_journal(args) -> int:
    if args.n is not None and args.n < 1:
        return usage_error(f"-n must be >= 1, got {args.n}")
    filters: dict = {}
    state_dir = args.state_dir
    try:
        if args.url:
            check_url(args.url)
            filters["target"] = args.url.rstrip("/")
        elif args.profile or args.demo:
            profile, state_dir = target_profile(args)
            filters["profile"] = profile.name
    except UsageError as exc:
        return usage_error(str(exc))
    found = journal.read_counted(state_dir, **filters)
    if found.unreadable is not None:
        print(f"specconsole: cannot read the journal {journal.journal_path(state_dir)}: {found.unreadable}", file=sys.stderr)
        return EXIT_UNREADABLE
    entries = found.entries
    if found.skipped:
        print(f"specconsole: {found.skipped} unreadable line(s) skipped in {journal.journal_path(state_dir)}", file=sys.stderr)
    if not args.steps:
        entries = collapse(entries)
    if args.n:
        entries = entries[-args.n :]
    for e in entries:
        print(json.dumps(e.to_json(), default=str) if args.json else e.words())
    if not entries and not args.json:  # JSON lines: none is no line; words: say it
        print(f"specconsole: no journal entries{_filtered(filters)} in {journal.journal_path(state_dir)}", file=sys.stderr)
    return EXIT_OK


def _filtered(filters: dict) -> str:
    if "target" in filters:
        return f" for {filters['target']}"
    if "profile" in filters:
        return f" for profile {filters['profile']}"
    return ""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "journal",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="who changed what, when, and how it went (runtime changes, launches, stops)",
    )
    group = p.add_mutually_exclusive_group()
    add_profile_argument(group)
    group.add_argument("--url", metavar="URL", help="only this server's entries")
    add_demo_arguments(p, group)
    p.add_argument("-n", type=int, metavar="N", help="only the last N entries")
    p.add_argument("--steps", action="store_true", help="also the pending / read back steps of each change")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(func=cmd_journal)
