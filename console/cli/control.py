"""`specconsole threshold [N]` and `specconsole verify`.

threshold: without N, print the threshold every DP rank reads back; with N, set it through
/set_internal_state and confirm it on every rank. `--force MODE` sets the forced mode
(auto | speculative | target_only) instead. `threshold auto` turns the supervising
process's tuner (`supervise --auto-tune`, which an operator's N turned off) back on: a
request in the journal, answered there by that process (supervision/tune_requests.py).
  Exit codes: 0 read / applied / tuning on; 1 refused by the server, unsupported (stock
  SGLang), error, or no supervising tuner answered within --wait; 2 bad arguments; 5 no
  answer at the server's URL; 130 interrupted.

verify: the three layers (configuration, initialisation, runtime), each pass / fail /
pending with the evidence and, on failure, the likely cause. `--wait S` keeps watching
up to S seconds while anything is pending. `--explain`: each rank's init line (its line
number and text), or what no init line means and where to look.
  Exit codes: 0 all pass; 1 a failure; 3 pending; 2 bad arguments; 5 no answer at the
  server's URL (the layers still printed, pending); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from console.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNREACHABLE,
    UsageError,
    add_target_arguments,
    answered_nothing,
    check_url,
    error,
    open_session,
    run_async,
    settle,
    target_profile,
    unreachable_hint,
)
from console.cli.status import verification_text
from server_control.model.operation import OperationResult
from server_control.model.verification import Verification
from server_control.model.vocabulary import ChangeState, Verdict
from server_control.protocol.arg_types import seconds_where
from server_control.protocol.decision import validate_force, validate_threshold
from server_control.supervision import tune_requests

THRESHOLD_EPILOG = (
    "Exit codes: 0 read/applied/tuning on, 1 refused by the server/unsupported/error/no "
    "supervising tuner answered, 2 bad arguments (an invalid N or MODE: nothing is sent), "
    "5 no answer at the server's URL, 130 interrupted."
)
AUTO = "auto"
VERIFY_EPILOG = "Exit codes: 0 all pass, 1 a failure, 3 pending, 2 bad arguments, 5 no answer, 130 interrupted."


def ranks_text(ranks: tuple[bool, ...] | list[bool]) -> str:
    """[True, True] -> 'on 2/2 DP ranks'; [True, False] -> 'on 1/2 DP ranks (DP1 said no)'."""
    said_no = [f"DP{i}" for i, ok in enumerate(ranks) if not ok]
    text = f"on {len(ranks) - len(said_no)}/{len(ranks)} DP ranks"
    return text + (f" ({', '.join(said_no)} said no)" if said_no else "")


def _print_change(args, result: OperationResult) -> None:
    change = result.change
    if change is None:  # every threshold/force result carries its change
        print(result.message)
        return
    if args.json:
        print(json.dumps(change.to_json(), indent=1))
        return
    print(f"{change.state}: {change.detail}" + (f" ({ranks_text(change.ranks)})" if change.ranks else ""))


async def _threshold(args) -> int:
    if args.value is not None and args.force is not None:
        raise UsageError("give either N or --force MODE, not both")
    if args.value == AUTO:
        return await asyncio.to_thread(_auto, args)
    if args.wait is not None:
        raise UsageError("--wait goes with `threshold auto`")
    try:  # a bad N or MODE is a bad argument (exit 2, nothing sent): ASCII digits only, 0..4096
        value = validate_threshold(args.value) if args.value is not None else None
        if args.force is not None:
            validate_force(args.force)
    except ValueError as exc:
        raise UsageError(f"refused: {exc}") from None
    session = open_session(args)
    await session.start()
    try:
        if args.value is None and args.force is None:
            await settle(session, timeout_s=2.0)  # one poll: is what answers this run's server?
            if session.foreign is not None:
                error(unreachable_hint(session.url, session))
                return EXIT_FAILED
            got = await session.read_settings()
            if args.json:
                print(json.dumps(got, indent=1))
            elif "error" in got:
                print(f"error: {got['error']}")
                error(unreachable_hint(session.url, session))
                if answered_nothing(session):
                    return EXIT_UNREACHABLE
            else:
                print(
                    f"threshold per DP rank: {got['thresholds']}  force: {got['force']}  runtime changes "
                    + ("supported" if got["supported"] else "NOT supported (stock SGLang?)")
                )
            return EXIT_FAILED if "error" in got else EXIT_OK
        await settle(session, timeout_s=2.0)  # the log is read, so a refusal can quote it
        if args.force is not None:
            result = await session.set_force(args.force)
        else:
            result = await session.set_threshold(value)
        _print_change(args, result)
        if (
            result.change is not None
            and result.change.state == ChangeState.ERROR
            and not (session.last and session.last.reachable)
        ):
            error(unreachable_hint(session.url, session))
            if answered_nothing(session):
                return EXIT_UNREACHABLE
        return EXIT_OK if result.done else EXIT_FAILED
    finally:
        await session.close()


def _auto(args) -> int:
    """`threshold auto`: ask the supervising process to tune again, wait for its answer."""
    if args.url:
        check_url(args.url)
        url, name, state_dir = args.url, None, args.state_dir
    else:
        profile, state_dir = target_profile(args, existing=True)
        url, name = profile.url, profile.name
    follow = tune_requests.Follower(state_dir)  # from here on: the answer comes after the ask
    ask = tune_requests.ask(state_dir, url, name)
    if ask is None:
        error(f"refused: the journal in {state_dir or 'the state dir'} could not be written (see the log)")
        return EXIT_FAILED
    got = tune_requests.answer(follow, ask.op, 10.0 if args.wait is None else args.wait)
    if args.json:
        print(json.dumps({"state": "on" if got else "no answer", "op": ask.op, "detail": got.detail if got else None}, indent=1))
    if got is None:
        error(
            f"no supervising tuner answered for {url}: auto-tune runs in `specconsole supervise "
            "--auto-tune LO-HI` (start it, or is it watching only?); the request stays in the journal"
        )
        return EXIT_FAILED
    if not args.json:
        print(f"{got.detail} ({got.who})")
    return EXIT_OK


async def _verify(args) -> int:
    if args.wait is not None and args.wait < 0:
        raise UsageError(f"--wait must be >= 0 seconds, got {args.wait}")
    session = open_session(args)
    await session.start()
    try:
        await settle(session)
        deadline = time.monotonic() + (args.wait or 0.0)
        result = (await session.verify()).verification
        while result is not None and result.summary == Verdict.PENDING and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            result = (await session.verify()).verification
        reachable, url = bool(session.last and session.last.reachable), session.url
        hint, nothing = unreachable_hint(url, session), answered_nothing(session)
        explained = session.init_explanation() if args.explain else None
    finally:
        await session.close()
    result = result or Verification()
    if args.json:
        out = result.to_json() | ({"init_lines": explained.to_json()} if explained else {})
        print(json.dumps(out, indent=1))
    else:
        print(verification_text(result, "verification", "likely cause"))
        if explained:
            print(explained.text())
    if not reachable:
        error(hint)
        if nothing:
            return EXIT_UNREACHABLE
    return result.exit_code


def cmd_threshold(args) -> int:
    return run_async(_threshold, args)


def cmd_verify(args) -> int:
    return run_async(_verify, args)


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    p = subparsers.add_parser(
        "threshold",
        formatter_class=fmt,
        epilog=THRESHOLD_EPILOG,
        help="read the dynamic speculation threshold, or set it on every rank",
    )
    p.add_argument(
        "value",
        nargs="?",
        metavar="N",
        help="new threshold (integer 0..4096; 0 = never disable; N counts decode requests in the step, "
        "raw, never padded to a CUDA-graph size), or `auto`: the supervising "
        "process's auto-tune back on; omit to read",
    )
    p.add_argument("--force", metavar="MODE", help="set the forced mode: auto | speculative | target_only")
    p.add_argument(
        "--wait",
        type=seconds_where("0 = do not wait"),
        metavar="S",
        help="with auto: how long to wait for the supervising process's answer (default 10)",
    )
    add_target_arguments(p)
    p.set_defaults(func=cmd_threshold)

    p = subparsers.add_parser(
        "verify", formatter_class=fmt, epilog=VERIFY_EPILOG, help="check configuration, initialisation and runtime switching"
    )
    add_target_arguments(p)
    p.add_argument("--wait", type=seconds_where("0 = look once"), metavar="S", help="keep watching up to S seconds while pending")
    p.add_argument(
        "--explain",
        action="store_true",
        help="also each rank's init line (Dynamic speculation disable enabled: threshold=N) with its line "
        "number, or what its absence means and where to look",
    )
    p.set_defaults(func=cmd_verify)
