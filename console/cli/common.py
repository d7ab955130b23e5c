"""What every `specconsole` subcommand shares: exit codes, the error printer, the
`--profile` / `--url` target options, the API-key variables, and opening a session on
the target (read-only: a headless command never takes over supervision)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server_control.model.vocabulary import RunState
from server_control.protocol.keys import ADMIN_API_KEY_ENV, API_KEY_ENV
from server_control.sanitize import strip_controls

if TYPE_CHECKING:
    from server_control.config.profile import Profile
    from server_control.session.session import Session

EXIT_OK = 0
EXIT_FAILED = 1  # the server or the operation failed
EXIT_USAGE = 2  # bad profile or arguments
EXIT_CONFLICT = 3  # launch/supervise: a live run holds the profile or its port
EXIT_PENDING = 3  # verify: a layer is still pending
EXIT_TIMEOUT = 4  # launch/restart --wait: not ready in time
EXIT_UNREACHABLE = 5  # status, threshold, verify: nothing answered at the server's URL
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_BROKEN_PIPE = 141  # the reader of stdout left (`... | head`)

PROFILE_HELP = "profile file or shipped name (default $SPECCONSOLE_PROFILE, else demo)"
URL_SCHEMES = ("http://", "https://")


class UsageError(Exception):
    """Bad arguments or profile: printed by ``run_async`` and exits EXIT_USAGE."""


def error(message: str, prefix: str = "specconsole") -> None:
    """The one error printer: ``<prefix>: <message>`` on stderr (terminal-safe: a message
    may quote a server, a log or a profile)."""
    print(strip_controls(f"{prefix}: {message}"), file=sys.stderr, flush=True)


def usage_error(message: str) -> int:
    error(message)
    return EXIT_USAGE


def add_profile_argument(p: argparse.ArgumentParser | Any) -> None:
    p.add_argument("--profile", metavar="F", help=PROFILE_HELP)


def add_key_env_arguments(p: argparse.ArgumentParser, defaults: bool = True, what: str = "") -> None:
    """--api-key-env / --admin-api-key-env: NAMES of variables holding the keys (never keys)."""
    for flag, default, which in (
        ("--api-key-env", API_KEY_ENV, "API key"),
        ("--admin-api-key-env", ADMIN_API_KEY_ENV, "admin API key"),
    ):
        if defaults:
            p.add_argument(
                flag,
                metavar="NAME",
                default=default,
                help=f"{what}environment variable holding the {which} (default %(default)s)",
            )
        else:
            p.add_argument(flag, metavar="NAME", help=f"{what}environment variable holding the {which}")


DEMO_HELP = "the run of `specconsole demo` (its state dir and the port it took)"
STATE_DIR_HELP = (
    "with --profile: the state dir (default $SPECCONSOLE_STATE_DIR or the user's); "
    "with --demo: the demo's (default <state dir>/demo)"
)
TARGET_HELP = "The server: --profile F, --url URL or --demo; with none of them $SPECCONSOLE_PROFILE, else the demo's run."


def add_demo_arguments(p: argparse.ArgumentParser | Any, group: Any) -> None:
    """--demo (in the target's exclusive ``group``) and --state-dir."""
    group.add_argument("--demo", action="store_true", help=DEMO_HELP)
    p.add_argument("--state-dir", metavar="DIR", help=STATE_DIR_HELP)


def add_target_arguments(p: argparse.ArgumentParser, log: bool = True) -> None:
    """--profile F | --url URL [--log FILE] | --demo, --state-dir, the key variables and --json
    (status/threshold/verify)."""
    group = p.add_mutually_exclusive_group()
    add_profile_argument(group)
    group.add_argument("--url", metavar="URL", help="a server to attach to, e.g. http://127.0.0.1:30000")
    add_demo_arguments(p, group)
    if log:
        p.add_argument("--log", metavar="FILE", help="with --url: the server's log file")
    add_key_env_arguments(p, what="with --url: ")
    p.add_argument("--json", action="store_true", help="print JSON")


def check_url(url: str, what: str = "--url") -> None:
    """A server URL: http(s), a host, and a port (when given) in 1..65535."""
    if not url.startswith(URL_SCHEMES):
        raise UsageError(f"{what} must start with http:// or https://, got {url!r}")
    from urllib.parse import urlsplit  # noqa: PLC0415

    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"{what} has a port that is not 1..65535, got {url!r}") from None
    if not parts.hostname:
        raise UsageError(f"{what} names no host, got {url!r}")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"{what} has a port that is not 1..65535, got {url!r}")


def key_from_env(var: str | None, flag: str, required: bool = False) -> str | None:
    """The value of the variable ``var`` names; with ``required`` an unset or empty one is
    a UsageError naming ``flag`` and the variable."""
    if not var:
        return None
    value = os.environ.get(var) or None
    if value is None and required:
        raise UsageError(f"{flag}: environment variable {var} is not set or empty")
    return value


def load_profile_arg(name: str | None) -> Profile:
    """The profile named by --profile (path or shipped name); a bad one is a UsageError
    naming the file and the key."""
    from server_control.config.profile import ProfileError, find_profile, load_profile  # noqa: PLC0415

    try:
        return load_profile(find_profile(name))
    except (ProfileError, OSError) as exc:
        raise UsageError(str(exc)) from None


def wants_demo(args: argparse.Namespace) -> bool:
    """--demo, or no target at all (no --profile, --url or $SPECCONSOLE_PROFILE)."""
    if getattr(args, "demo", False):
        return True
    return not (getattr(args, "profile", None) or getattr(args, "url", None) or os.environ.get("SPECCONSOLE_PROFILE"))


class NoRun(Exception):
    """The command needs a run and there is none (`--demo` without a demo run): said, exit 1."""


def target_profile(args: argparse.Namespace, existing: bool = False) -> tuple[Profile, Path | None]:
    """The profile and its state dir: --profile F (and --state-dir), or the demo's run
    (``existing``: its recorded run; none raises NoRun)."""
    from console.cli.demo_target import NoDemoRun, demo_state_dir, demo_target  # noqa: PLC0415

    if wants_demo(args):
        try:
            target = demo_target(demo_state_dir(getattr(args, "state_dir", None)), existing=existing)
        except NoDemoRun as exc:
            raise NoRun(str(exc)) from None
        return target.profile, target.state_dir
    state = getattr(args, "state_dir", None)
    return load_profile_arg(args.profile), Path(state) if state else None


def open_session(args: argparse.Namespace, poll_interval_s: float = 0.25) -> Session:
    """A Session for --url, --profile or --demo (read-only: it never takes over supervision)."""
    from server_control.session.session import Session  # noqa: PLC0415 - heavy, only when needed

    if getattr(args, "log", None) and not args.url:
        raise UsageError("--log goes with --url (a profile knows its own log)")
    if args.url:
        check_url(args.url)
        return Session.attach(
            args.url,
            log_path=getattr(args, "log", None),
            api_key=key_from_env(args.api_key_env, "--api-key-env"),
            admin_api_key=key_from_env(args.admin_api_key_env, "--admin-api-key-env"),
            poll_interval_s=poll_interval_s,
        )
    try:
        profile, state_dir = target_profile(args, existing=True)
        return Session.for_profile(profile, state_dir=state_dir, supervise=False, poll_interval_s=poll_interval_s)
    except OSError as exc:
        raise UsageError(str(exc)) from None


def answered_nothing(session: Session) -> bool:
    """The last poll found nothing answering at the URL (refused, unreachable, timed out):
    exit 5; a server that answered wrongly (too large, an HTTP error) is a failure (1)."""
    from server_control.net.http import no_answer  # noqa: PLC0415 - with the session

    last = session.last
    return last is None or (not last.reachable and no_answer(last.error))


def unreachable_hint(url: str, session: Session | None = None) -> str:
    """Printed under every connection error: which server was asked, how to choose another;
    a run that is not running, or a port that another server holds, is said as such."""
    if session is not None and session.foreign is not None:
        return f"{url}: {session.foreign}"
    if session is not None and session.profile is not None:
        run = session.run.status()
        if run.state in (RunState.STOPPED, None):
            return f"{session.profile.name} is not running (stopped; nothing answers at {url})"
    return f"no answer from {url}; choose the server with --url URL, --profile F, or --demo (the run of `specconsole demo`)"


async def settle(session: Session, timeout_s: float = 5.0) -> None:
    """Wait for one poll, for the log to be read up to where it was when we began, and for
    the GPU sampler's first sample (or its reason for having none)."""
    deadline = time.monotonic() + timeout_s
    path = session.snapshot().logs.path
    size = os.path.getsize(path) if path and os.path.exists(path) else None
    while time.monotonic() < deadline:
        gpus = session.nvml.snapshot()
        gpus_said = session.nvml.samples >= 1 or (not gpus.available and gpus.reason != "not started")
        if session.polls >= 1 and session.log_caught_up(size) and gpus_said:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.05)  # the records of the last chunk reach the listeners


def run_async(coro_fn: Callable[[argparse.Namespace], Awaitable[int]], args: argparse.Namespace) -> int:
    """Run a command's coroutine; a UsageError is printed and exits EXIT_USAGE."""
    try:
        return asyncio.run(coro_fn(args))  # type: ignore[arg-type]
    except UsageError as exc:
        return usage_error(str(exc))
    except NoRun as exc:
        return no_run(args, exc)


def no_run(args: argparse.Namespace, exc: NoRun) -> int:
    """No run to read (the demo's, say): the reason on stderr and, with --json, on stdout
    too (a script reading stdout gets it, as a stopped profile's ``{"error"}``); exit 1."""
    if getattr(args, "json", False):
        import json  # noqa: PLC0415

        print(json.dumps({"error": strip_controls(str(exc)), "running": False}), flush=True)
    error(str(exc))
    return EXIT_FAILED
