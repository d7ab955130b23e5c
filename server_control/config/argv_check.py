"""Does the profile's SGLang take the command line we built? Asked of SGLang's own parser
(``ServerArgs.add_cli_args``, with the patch's flags) in the profile's interpreter, in a
bounded subprocess (``python -m server_control.sglang_patch.parse_check``), before any
server process or run record exists. A refusal names the profile file and the key the
refused flag came from; an interpreter that cannot build the parser is a skip, said once,
never a refusal. A yes is kept (``server_control/config/parse_verdicts.py``): the same
interpreter, SGLang, patch and command line are not asked twice."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

from server_control.config import parse_verdicts
from server_control.config.profile import SERVE_MODULES, LaunchSpec, Profile

PARSE_MODULE = "server_control.sglang_patch.parse_check"
TIMEOUT_S = 120.0  # importing SGLang's server args takes ~8 s on an idle 2-core machine
MAX_OUTPUT = 64 * 1024
_FLAG_RE = re.compile(r"(--[A-Za-z0-9][A-Za-z0-9_-]*)")


@dataclass(frozen=True)
class ArgvCheck:
    refusal: str | None  # "<file>: <key>: SGLang refuses the command line: <why>", None if it parses
    skipped: str | None  # why the parser could not be asked (no SGLang there, a timeout), None if asked
    kept_at: float | None = None  # a yes kept from this time (epoch s): the parser was not asked again

    @property
    def ok(self) -> bool:
        return self.refusal is None


def server_argv(spec: LaunchSpec) -> list[str]:
    """The launch_server arguments of a launch spec (after ``python -m <serve module>``)."""
    argv = list(spec.argv)
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] == SERVE_MODULES["sglang"]:
        return argv[3:]
    raise ValueError(f"not an SGLang launch: {spec.command_line()}")


def key_of(profile: Profile, flag: str | None) -> str:
    """The profile key a flag came from: extra_args when it is there, else the keys the
    launcher turns into flags ([server], [speculative], [dynamic])."""
    extra = [str(a) for a in profile.server.get("extra_args") or ()]
    if flag is not None and any(a == flag or a.startswith(flag + "=") for a in extra):
        return "[server] extra_args"
    if flag is not None and flag.startswith("--speculative-disable"):
        return "[dynamic]"
    if flag is not None and flag.startswith("--speculative"):
        return "[speculative]"
    return "[server]"


def check_argv(profile: Profile, spec: LaunchSpec, timeout_s: float = TIMEOUT_S, *, kept: bool = True) -> ArgvCheck:
    """SGLang's parser's verdict on the launch's command line; a yes kept for the same
    interpreter, SGLang, patch and command line answers without asking (``kept=False``, or
    ``SPECCONSOLE_PARSE_VERDICTS=off``: always ask)."""
    try:
        args = server_argv(spec)
    except ValueError as exc:
        return ArgvCheck(None, str(exc))
    key = None
    if kept and parse_verdicts.enabled():
        stamp = parse_verdicts.read_stamp(spec.argv[0], spec.env, spec.cwd)
        key = parse_verdicts.verdict_key(stamp, args) if stamp is not None else None
        found = parse_verdicts.lookup(key) if key is not None else None
        if found is not None:
            return ArgvCheck(None, None, kept_at=found.at)
    result = _ask(profile, spec, args, timeout_s)
    if key is not None and result.ok and result.skipped is None:
        parse_verdicts.keep(key)
    return result


def _ask(profile: Profile, spec: LaunchSpec, args: list[str], timeout_s: float) -> ArgvCheck:
    where = str(profile.path) if profile.path is not None else "<profile>"
    try:
        out = subprocess.run(
            [spec.argv[0], "-m", PARSE_MODULE],
            input=json.dumps(args),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=spec.env,
            cwd=spec.cwd,
        )
    except subprocess.TimeoutExpired:
        return ArgvCheck(None, f"SGLang's parser did not answer within {timeout_s:.0f} s")
    except OSError as exc:
        return ArgvCheck(None, f"{spec.argv[0]} cannot be run: {exc.strerror or exc}")
    lines = out.stdout[-MAX_OUTPUT:].strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or "ok" not in answer:
        why = (out.stderr[-MAX_OUTPUT:].strip().splitlines() or ["no answer"])[-1]
        return ArgvCheck(None, f"SGLang's parser could not be asked ({why[:300]})")
    if answer["ok"] is True:
        return ArgvCheck(None, None)
    error = str(answer.get("error", ""))[:500]
    if answer["ok"] is None:
        return ArgvCheck(None, error)
    m = _FLAG_RE.search(error)
    flag = m.group(1) if m else None
    return ArgvCheck(f"{where}: {key_of(profile, flag)}: SGLang refuses the command line: {error}", None)
