"""`specconsole launch --dry-run`: the exact command and environment a launch would run (keys
masked), checked by SGLang's own parser where the profile's Python has SGLang; and that
parser's verdict before a real launch (``parse_refusal``)."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime

from console.cli.common import EXIT_OK, error
from server_control.config.argv_check import check_argv
from server_control.config.interpreter import check_sglang
from server_control.sanitize import strip_controls


def print_preview(args, profile) -> int:
    """The dry run: said on stdout (JSON with --json), problems a real launch would meet on stderr."""
    problems: list[str] = []
    spec = profile.launch_spec(getattr(args, "run_state_dir", None), preview=problems)
    sglang = check_sglang(spec.argv[0]) if profile.kind == "sglang" else None
    if sglang is not None and sglang.problem:
        problems.append(sglang.problem)
    parsed = check_argv(profile, spec) if sglang is not None and sglang.version else None
    if parsed is not None and parsed.refusal:
        problems.append(parsed.refusal)
    problems = list(dict.fromkeys(problems))
    env = spec.masked_env_overrides()
    for problem in problems:
        error(f"warning: a real launch would fail: {problem}")
    if args.json:
        print(
            json.dumps(
                {
                    "profile": profile.name,
                    "argv": spec.masked_argv(),
                    "env": env,
                    "cwd": str(spec.cwd),
                    "log_path": str(spec.log_path),
                    "sglang": sglang.version if sglang else None,
                    "problems": problems,
                    "parsed_by_sglang": None if parsed is None or parsed.skipped else parsed.ok,
                    "parsed_verdict_kept_at": _iso(parsed.kept_at) if parsed is not None else None,
                }
            )
        )
    else:
        # paths come from the operator's files and directories: never let them drive the terminal
        print(strip_controls(f"# profile {profile.name} ({profile.path})").replace("\n", " "))
        print(strip_controls(f"# cwd {spec.cwd}").replace("\n", " "))
        print(strip_controls(f"# log {spec.log_path}").replace("\n", " "))
        if sglang is not None and sglang.version:
            print(f"# {sglang.describe()}")
        if parsed is not None:
            verdict = parsed.skipped or ("refuses it" if parsed.refusal else "takes it")
            print(f"# SGLang's parser: {verdict}{_kept(parsed.kept_at)}")
        for k, v in env.items():
            print(f"{k}={shlex.quote(v)}")
        print(spec.command_line())
    return EXIT_OK


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


def _kept(at: float | None) -> str:
    """Said when the verdict is a kept one: the parser was not asked this time."""
    return "" if at is None else f" (kept: it took the same command line with this SGLang at {_iso(at)})"


def parse_refusal(args, profile) -> str | None:
    """Why SGLang's own parser refuses the command line a launch would run (None: it takes
    it, or it cannot be asked there: then a warning says so and the launch goes on)."""
    if profile.kind != "sglang":
        return None
    spec = profile.launch_spec(getattr(args, "run_state_dir", None), preview=[])
    parsed = check_argv(profile, spec)
    if parsed.skipped:
        error(f"warning: the command line was not checked by SGLang's parser: {parsed.skipped}")
    return parsed.refusal
