"""`specconsole advise`: the threshold the server's own cost curves suggest.

The patched server (and the simulator) count, per mode and decode-batch bucket, decode
steps, their seconds and the tokens committed (`/server_info` `dynamic_speculation`
`cost_curves`). This reads them, folds them into the curves kept in the state dir (so
what an earlier console or an earlier life of the server learnt still counts, and how old
it is is shown), and prints the crossover with its 95 % interval and one sentence:

    N=12 would give +8% at batch 9-12 (measured over 40 min, 95% interval 10-14)

The server: --profile F, --url URL or --demo (the run of `specconsole demo`). If the
server does not answer, the saved curves are used (and the exit code is 1).

Exit codes: 0 advice given (or not enough data yet, said so); 1 the server did not answer
or publishes no curves; 2 bad arguments or a bad saved curves file; 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import time

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    NoRun,
    UsageError,
    add_target_arguments,
    check_url,
    error,
    key_from_env,
    no_run,
    target_profile,
    usage_error,
)
from server_control.advice import store
from server_control.advice.source import SourceError, advice_on, read_server
from server_control.advice.words import Advice, duration
from server_control.protocol.crossover import Point


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "advise",
        help="the threshold N the server's measured cost curves suggest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_target_arguments(p, log=False)
    p.add_argument("--no-save", action="store_true", help="do not fold this reading into the saved curves")
    p.set_defaults(func=run)


def _target(args: argparse.Namespace) -> tuple[str, str | None, str | None]:
    """(url, api key, state dir) of --url, --profile or --demo."""
    if args.url:
        check_url(args.url)
        return args.url, key_from_env(args.api_key_env, "--api-key-env"), args.state_dir
    profile, state = target_profile(args, existing=True)  # --demo: its recorded run, never a guessed port
    return profile.url, profile.api_key(), str(state) if state else None


def render(adv: Advice, url: str, saved: store.Saved | None, stale: str | None) -> str:
    e = adv.estimate
    lines = [f"{url}  threshold N={adv.current if adv.current is not None else '-'}"]
    if stale:
        lines.append(
            f"server did not answer ({stale}); from the curves saved {duration(saved.age_s())} ago"
            if saved
            else f"server did not answer ({stale})"
        )
    elif saved is not None and saved.base.buckets:
        lines.append(f"includes curves from earlier server runs (first seen {duration(time.time() - saved.first_seen)} ago)")
    acc = f"{e.accept_length:.2f}" if e.accept_length is not None else "-"
    ctx = f"{e.mean_context:.0f} tokens" if e.mean_context is not None else "not published"
    lines.append(f"measured at accept length {acc}, mean context {ctx}, over {duration(e.busy_seconds)} of decode")
    lines.append("   batch   speculative tok/s   target-only tok/s   steps")
    rows: dict[tuple[int, int], dict[str, Point]] = {}
    for p in e.points:
        rows.setdefault((p.lo, p.hi), {})[p.mode] = p
    for (lo, hi), by in sorted(rows.items()):
        label = str(hi) if lo == hi else (f"{lo}-{hi}" if hi else f">{lo - 1}")
        cells = []
        steps = 0
        for mode in ("speculative", "target_only"):
            pt = by.get(mode)
            cells.append(f"{pt.tok_s:9.1f} ± {pt.tok_s_se:5.1f}" if pt else f"{'-':>17}")
            steps += pt.steps if pt else 0
        lines.append(f"{label:>8}   {cells[0]:>17}   {cells[1]:>17}   {steps:5d}")
    if e.crossover is not None:
        lines.append(f"crossover: target-only faster from batch {e.crossover}")
    lines.append(adv.sentence)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        url, key, state_dir = _target(args)
    except UsageError as exc:
        return usage_error(str(exc))
    except NoRun as exc:
        return no_run(args, exc)
    stale = None
    try:
        reading = read_server(url, key)
    except SourceError as exc:
        stale, reading = str(exc), None
    try:
        if reading is None:
            saved = store.load(url, None, state_dir)
        elif args.no_save:
            old = store.load(url, reading.model, state_dir)
            saved = store.Saved(
                url,
                reading.model,
                time.time(),
                old.first_seen if old else time.time(),
                old.total() if old else store.EMPTY,
                reading.curves,
            )
        else:
            saved = store.update(url, reading.model, reading.curves, state_dir)
    except store.StoreError as exc:
        error(str(exc))
        return EXIT_USAGE
    if saved is None:
        error(stale or "no curves")
        return EXIT_FAILED
    adv = advice_on(saved.total(), reading)
    if args.json:
        doc = adv.to_json()
        doc.update(
            url=url,
            server_answered=reading is not None,
            error=stale,
            saved_age_s=round(saved.age_s(), 1) if reading is None else 0.0,
            first_seen_age_s=round(time.time() - saved.first_seen, 1),
            force=reading.force if reading else None,
            cold_draft_above=reading.cold_draft_above if reading else None,
        )
        print(json.dumps(doc, indent=2))
    else:
        print(render(adv, url, saved, stale))
    return EXIT_FAILED if stale else EXIT_OK
