"""Profile schema and validation: a parsed TOML document -> checked section dicts + errors.

Used by ``server_control.config.profile``; each error is ``[section] key: what is wrong``.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from server_control.protocol import decision
from server_control.protocol.sim_flags import SIM_FLAG_BY_KEY

KINDS = ("sim", "sglang")
SPEC_ALGORITHMS = ("", "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")
SIM_KEYS = tuple(SIM_FLAG_BY_KEY)  # [sim] key -> the simulator's --sim-<key> (one table)


def sim_value_problem(key: str, value: Any) -> str | None:
    """What the simulator's own parser would refuse in ``[sim] key = value``, or None."""
    flag = SIM_FLAG_BY_KEY.get(key)
    return None if flag is None else flag.problem(value)


MAX_TP_SIZE = 64  # [server] tp_size and dp_size: no node or cluster a profile drives has more
MAX_DP_SIZE = 64
HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME_RE = re.compile(rf"^{HOST_LABEL}(?:\.{HOST_LABEL})*\.?$")


def host_problem(host: str) -> str | None:
    """Why ``host`` is not a host name or an IP address (None: it is one)."""
    try:
        ipaddress.ip_address(host.strip("[]") if host.startswith("[") and host.endswith("]") else host)
        return None
    except ValueError:
        pass
    if len(host) <= 253 and HOSTNAME_RE.match(host):
        return None
    return "must be a host name or an IP address (no port, user, path or spaces)"


def nul_problems(data: object, where: str = "") -> list[str]:
    """Every string (key or value) with a NUL character: no argv or environment can carry one."""
    out: list[str] = []
    if isinstance(data, dict):
        for k, v in data.items():
            name = f"{where} {k}".strip() if where else str(k)
            if isinstance(k, str) and "\0" in k:
                out.append(f"{name!r}: a key must not contain a NUL character")
            out += nul_problems(v, name)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += nul_problems(v, f"{where}[{i}]")
    elif isinstance(data, str) and "\0" in data:
        out.append(f"{where}: must not contain a NUL character")
    return out


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# ---- schema: section -> key -> (type tag, default) ----------------------------------------
SCHEMA: dict[str, dict[str, tuple[str, Any]]] = {
    "server": {
        "kind": ("str", "sim"),
        "python": ("str", ""),
        "model_path": ("str", ""),
        "host": ("str", "127.0.0.1"),
        "port": ("int", 30000),
        "tp_size": ("int", 1),
        "dp_size": ("int", 1),
        "log_dir": ("str", ""),
        "log_mode": ("str", "0600"),
        "log_rotate_mb": ("float", 100.0),
        "log_rotate_keep": ("int", 3),
        "cwd": ("str", ""),
        "extra_args": ("strlist", []),
        "api_key_env": ("str", ""),
        "admin_api_key_env": ("str", ""),
    },
    "speculative": {
        "algorithm": ("str", "EAGLE3"),
        "draft_model_path": ("str", ""),
        "num_steps": ("int", 3),
        "eagle_topk": ("int", 1),
        "num_draft_tokens": ("int", 4),
    },
    "dynamic": {
        "threshold": ("int", 0),
        "hysteresis": ("int", decision.DEFAULT_HYSTERESIS),
        "min_dwell_steps": ("int", decision.DEFAULT_MIN_DWELL_STEPS),
        "force_mode": ("str", "auto"),
    },
    "restart": {
        "enabled": ("bool", True),
        "backoff_initial_s": ("float", 1.0),
        "backoff_max_s": ("float", 30.0),
        "burst": ("int", 5),
        "window_s": ("float", 60.0),
        "stop_grace_s": ("float", None),
        "keep_logs": ("int", 20),
        "reapply_runtime": ("bool", True),
    },
    "health": {
        "path": ("str", "/health"),
        "interval_s": ("float", 2.0),
        "timeout_s": ("float", 5.0),
        "failures": ("int", 3),
        "watchdog": ("bool", True),
        "start_timeout_s": ("float", 1800.0),
    },
}
FREE_SECTIONS = ("env", "sim")  # key/value tables
TOP_KEYS = ("name",)


def _typed(tag: str, value: Any) -> tuple[bool, Any]:
    if tag == "str":
        return isinstance(value, str), value
    if tag == "int":
        return isinstance(value, int) and not isinstance(value, bool), value
    if tag == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok, float(value) if ok else value
    if tag == "bool":
        return isinstance(value, bool), value
    if tag == "strlist":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return ok, tuple(value) if ok else value
    raise AssertionError(tag)


_TAG_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "strlist": "a list of strings",
}


def validate(data: dict[str, Any], stem: str) -> tuple[dict[str, Any], list[str]]:
    errors: list[str] = []
    out: dict[str, Any] = {}
    for section, raw in data.items():  # "[server] extra_args[1]: must not contain a NUL character"
        errors += nul_problems(raw, f"[{section}]" if isinstance(raw, dict) else section)
    for key in data:
        if key not in TOP_KEYS and key not in SCHEMA and key not in FREE_SECTIONS:
            known = ", ".join([*TOP_KEYS, *(f"[{s}]" for s in (*SCHEMA, *FREE_SECTIONS))])
            errors.append(f"{key}: unknown key (known: {known})")
    name = data.get("name", stem)
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"name: must be letters, digits, '.', '_' or '-', got {name!r}")
    out["name"] = name
    for section, keys in SCHEMA.items():
        out[section] = _typed_section(section, keys, _table(data, section, errors), errors)
    for section in FREE_SECTIONS:
        raw = _table(data, section, errors)
        out[section] = _env_section(raw, errors) if section == "env" else _sim_section(raw, errors)
    errors += _check_values(out)
    return out, errors


def _table(data: dict[str, Any], section: str, errors: list[str]) -> dict[str, Any]:
    raw = data.get(section, {})
    if not isinstance(raw, dict):
        errors.append(f"{section}: must be a table [{section}], got {type(raw).__name__}")
        return {}
    return raw


def _typed_section(section: str, keys: dict[str, tuple[str, Any]], raw: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    vals = {k: (list(d) if isinstance(d, list) else d) for k, (_, d) in keys.items()}
    for k, v in raw.items():
        if k not in keys:
            errors.append(f"[{section}] {k}: unknown key (known: {', '.join(keys)})")
            continue
        tag = keys[k][0]
        ok, conv = _typed(tag, v)
        if not ok:
            errors.append(f"[{section}] {k}: expected {_TAG_WORDS[tag]}, got {v!r}")
            continue
        if tag == "float" and not math.isfinite(conv):
            errors.append(f"[{section}] {k}: must be a finite number, got {v!r}")
            continue  # the default stays: no second message about the same key
        vals[k] = conv
    if isinstance(vals.get("extra_args"), list):
        vals["extra_args"] = tuple(vals["extra_args"])
    return vals


def _env_section(raw: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if not ENV_RE.match(k):
            errors.append(f"[env] {k}: not a valid environment variable name")
        elif isinstance(v, bool) or not isinstance(v, (str, int, float)):
            errors.append(f"[env] {k}: expected a string or a number, got {v!r}")
        else:
            out[k] = str(v)
    return out


def _sim_section(raw: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if k not in SIM_KEYS:
            errors.append(f"[sim] {k}: unknown key (known: {', '.join(SIM_KEYS)})")
        elif not isinstance(v, (str, int, float, bool)):
            errors.append(f"[sim] {k}: expected a string, number or boolean, got {v!r}")
        elif (problem := sim_value_problem(k, v)) is not None:
            errors.append(f"[sim] {k}: {problem}")
        else:
            out[k] = v
    return out


def log_mode(text: str) -> int:
    """``log_mode = "0640"`` -> 0o640; ValueError says why it is refused."""
    if not re.fullmatch(r"0?[0-7]{3}", text):
        raise ValueError(f'must be an octal file mode such as "0600", got {text!r}')
    mode = int(text, 8)
    if mode & 0o600 != 0o600:
        raise ValueError(f"must let the owner read and write (0600 at least), got {text!r}")
    if mode & 0o133:
        raise ValueError(f"must not be executable, or writable by group or others, got {text!r}")
    return mode


def _log_problems(s: dict[str, Any]) -> list[str]:
    e = []
    if isinstance(s["log_mode"], str):
        try:
            log_mode(s["log_mode"])
        except ValueError as exc:
            e.append(f"[server] log_mode: {exc}")
    if isinstance(s["log_rotate_mb"], float) and s["log_rotate_mb"] < 0:
        e.append(f"[server] log_rotate_mb: must be a finite number >= 0 (0 = never rotate), got {s['log_rotate_mb']:g}")
    if isinstance(s["log_rotate_keep"], int) and s["log_rotate_keep"] < 0:
        e.append(f"[server] log_rotate_keep: must be >= 0, got {s['log_rotate_keep']}")
    return e


def _check_values(p: dict[str, Any]) -> list[str]:
    s, sp, dy, rs, hl = p["server"], p["speculative"], p["dynamic"], p["restart"], p["health"]
    return [
        *_server_problems(s),
        *_speculative_problems(s, sp),
        *_dynamic_problems(dy),
        *_restart_problems(rs),
        *_health_problems(hl),
    ]


# the key flags of SGLang's launch_server and the profile key that carries each one instead
KEY_FLAGS = {"--api-key": "api_key_env", "--admin-api-key": "admin_api_key_env"}


def _key_flag(arg: str) -> str | None:
    """The key flag ``arg`` is (also as ``--flag=value`` or an abbreviation argparse takes)."""
    flag = arg.split("=", 1)[0]
    for name in KEY_FLAGS:
        if flag == name or (len(flag) >= 5 and flag.startswith("--") and name.startswith(flag) and flag != "--"):
            return name
    return None


def _server_problems(s: dict[str, Any]) -> list[str]:
    e: list[str] = []
    if s["kind"] not in KINDS:
        e.append(f"[server] kind: must be one of {', '.join(KINDS)}, got {s['kind']!r}")
    if isinstance(s["port"], int) and not 1 <= s["port"] <= 65535:
        e.append(f"[server] port: must be 1..65535, got {s['port']}")
    if not s["host"]:
        e.append("[server] host: must not be empty")
    elif isinstance(s["host"], str) and (why := host_problem(s["host"])):
        e.append(f"[server] host: {why}, got {s['host']!r}")
    for k, top in (("tp_size", MAX_TP_SIZE), ("dp_size", MAX_DP_SIZE)):
        if isinstance(s[k], int) and not 1 <= s[k] <= top:
            e.append(f"[server] {k}: must be 1..{top}, got {s[k]}")
    e += _log_problems(s)
    for k in ("api_key_env", "admin_api_key_env"):
        if s[k] and not ENV_RE.match(s[k]):
            e.append(f"[server] {k}: must be the NAME of an environment variable, got {s[k]!r}")
    if s["kind"] == "sglang" and not s["model_path"]:
        e.append('[server] model_path: required for kind = "sglang"')
    for i, arg in enumerate(s["extra_args"] if isinstance(s["extra_args"], (list, tuple)) else ()):
        if isinstance(arg, str) and (flag := _key_flag(arg)):
            e.append(
                f"[server] extra_args[{i}]: {flag} would put a key on the command line (ps, the run record, "
                f"--dry-run): name the variable that holds it in [server] {KEY_FLAGS[flag]} instead"
            )
    return e


def _speculative_problems(s: dict[str, Any], sp: dict[str, Any]) -> list[str]:
    e: list[str] = []
    if sp["algorithm"] not in SPEC_ALGORITHMS:
        choices = ", ".join(repr(a) for a in SPEC_ALGORITHMS)
        e.append(f"[speculative] algorithm: must be one of {choices}, got {sp['algorithm']!r}")
    if s["kind"] == "sglang" and sp["algorithm"] in ("EAGLE", "EAGLE3", "STANDALONE") and not sp["draft_model_path"]:
        e.append(f"[speculative] draft_model_path: required for algorithm {sp['algorithm']}")
    for k, lo in (("num_steps", 0), ("eagle_topk", 1), ("num_draft_tokens", 1)):
        if isinstance(sp[k], int) and sp[k] < lo:
            e.append(f"[speculative] {k}: must be >= {lo}, got {sp[k]}")
    return e


def _dynamic_problems(dy: dict[str, Any]) -> list[str]:
    """Also normalises each value (``dy[k] = check(dy[k])``)."""
    e: list[str] = []
    for k, check in (
        ("threshold", decision.validate_threshold),
        ("hysteresis", decision.validate_hysteresis),
        ("min_dwell_steps", decision.validate_dwell),
        ("force_mode", decision.validate_force),
    ):
        try:
            dy[k] = check(dy[k])
        except ValueError as exc:
            e.append(f"[dynamic] {k}: {exc}")
    return e


def _restart_problems(rs: dict[str, Any]) -> list[str]:
    e: list[str] = []
    for k in ("backoff_initial_s", "backoff_max_s", "window_s"):
        if isinstance(rs[k], float) and rs[k] <= 0:
            e.append(f"[restart] {k}: must be a finite number > 0, got {rs[k]}")
    if (
        isinstance(rs["backoff_max_s"], float)
        and isinstance(rs["backoff_initial_s"], float)
        and rs["backoff_max_s"] < rs["backoff_initial_s"]
    ):
        e.append("[restart] backoff_max_s: must be >= backoff_initial_s")
    for k in ("burst", "keep_logs"):
        if isinstance(rs[k], int) and rs[k] < 1:
            e.append(f"[restart] {k}: must be >= 1, got {rs[k]}")
    if isinstance(rs["stop_grace_s"], float) and rs["stop_grace_s"] < 0:
        e.append(f"[restart] stop_grace_s: must be a finite number >= 0 (0 = SIGKILL at once), got {rs['stop_grace_s']}")
    return e


MIN_HEALTH_S = 0.05
MAX_START_TIMEOUT_S = 7 * 86400.0  # a week: past it, 0 says "never" better


def _health_problems(hl: dict[str, Any]) -> list[str]:
    e: list[str] = []
    if isinstance(hl["path"], str) and not hl["path"].startswith("/"):
        e.append(f"[health] path: must start with '/', got {hl['path']!r}")
    for k in ("interval_s", "timeout_s"):
        if isinstance(hl[k], float) and hl[k] < MIN_HEALTH_S:
            # each check is a request (SGLang's /health generates a token): 1e-300 sent ~300 a second
            e.append(f"[health] {k}: must be >= {MIN_HEALTH_S} s (as in fleet files), got {hl[k]}")
    if isinstance(hl["failures"], int) and hl["failures"] < 1:
        e.append(f"[health] failures: must be >= 1, got {hl['failures']}")
    start = hl["start_timeout_s"]
    if isinstance(start, float) and not (start == 0 or MIN_HEALTH_S <= start <= MAX_START_TIMEOUT_S):
        e.append(f"[health] start_timeout_s: must be 0 (never) or {MIN_HEALTH_S}..{MAX_START_TIMEOUT_S:g} s, got {start}")
    return e
