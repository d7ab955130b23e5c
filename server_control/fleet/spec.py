"""Fleet file (TOML) -> validated, frozen ``FleetSpec``.

    spec = load_fleet(path)     # raises FleetError naming the file, the member and the key

A fleet is several servers seen and steered from one console: local profiles (launched and
supervised from this host), profiles on other hosts reached over SSH (the headless CLI on
that host does the work), and plain URLs (attach only); optionally SGLang's gateway (smg)
in front of them. Schema: docs/fleet.md. Every error of a file is reported together, one
line each, as ``<file>: [members.NAME] key: <what is wrong>``; a local member's profile is
loaded and validated too, and its own errors are quoted under the member.
"""

from __future__ import annotations

import math
import os
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server_control.config.profile import Profile, ProfileError, find_profile, load_profile
from server_control.config.schema import ENV_RE, NAME_RE, nul_problems
from server_control.state.private_files import read_regular

LOCAL, SSH, URL = "local", "ssh", "url"
MEMBER_KINDS = (LOCAL, SSH, URL)
MAX_FLEET_BYTES = 4 << 20  # a fleet file of a thousand members is ~200 kB: /dev/zero or a FIFO is refused
GATEWAY_POLICIES = ("round_robin", "random", "cache_aware", "power_of_two", "least_load", "consistent_hashing", "prefix_hash")
DEFAULT_REMOTE_COMMAND = ("specconsole",)

# key -> (type tag, default); tags as in profile_schema: str int float bool strlist strmap
TOP = {"name": ("str", None), "poll_interval_s": ("float", 1.0), "status_interval_s": ("float", 10.0)}
MEMBER = {
    "profile": ("str", ""),
    "host": ("str", ""),
    "url": ("str", ""),
    "log": ("str", ""),
    "ssh_options": ("strlist", []),
    "command": ("strlist", list(DEFAULT_REMOTE_COMMAND)),
    "env": ("strmap", {}),
    "worker_url": ("str", ""),
    "gateway": ("bool", True),
    "api_key_env": ("str", ""),
    "admin_api_key_env": ("str", ""),
}
SSH_ONLY = ("ssh_options", "command", "env")
GATEWAY = {
    "host": ("str", "127.0.0.1"),
    "port": ("int", 30100),
    "policy": ("str", "round_robin"),
    "python": ("str", ""),
    "prometheus_port": ("int", 0),
    "health_check_interval_s": ("int", 5),
    "extra_args": ("strlist", []),
    "log_dir": ("str", ""),
    "stop_grace_s": ("float", 5.0),
}
_WORDS = {
    "str": "a string",
    "int": "an integer",
    "float": "a finite number",
    "bool": "true or false",
    "strlist": "a list of strings",
    "strmap": "a table of strings",
}


class FleetError(ValueError):
    """A fleet file is invalid. ``str(err)`` names the file, the member and the key."""

    def __init__(self, message: str, path: str | Path | None = None, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.path = str(path) if path is not None else None
        self.keys = keys


@dataclass(frozen=True)
class MemberSpec:
    name: str
    kind: str  # local | ssh | url
    profile_ref: str = ""  # as written: a path (local: resolved) or a name
    profile: Profile | None = None  # local members: the loaded profile
    host: str = ""  # ssh destination (ssh config names work)
    url: str = ""  # url members
    log: Path | None = None  # url members: the server's log file, if readable here
    ssh_options: tuple[str, ...] = ()
    command: tuple[str, ...] = DEFAULT_REMOTE_COMMAND
    env: tuple[tuple[str, str], ...] = ()
    worker_url: str = ""  # what the gateway uses; "" = the member's own URL
    gateway: bool = True
    api_key_env: str = ""
    admin_api_key_env: str = ""

    @property
    def where(self) -> str:
        """The host column: 'local', the ssh destination, or the URL's host."""
        if self.kind == SSH:
            return self.host
        if self.kind == URL:
            return self.url.split("://", 1)[-1].split("/", 1)[0]
        return "local"

    def remote_argv(self, *args: str) -> list[str]:
        """The remote CLI command line (``env K=V ... specconsole ARGS``), as argv."""
        env = [f"{k}={v}" for k, v in self.env]
        return (["env", *env] if env else []) + [*self.command, *args]

    def remote_command(self, *args: str) -> str:
        """The same, as the one string ssh hands to the remote shell."""
        return shlex.join(self.remote_argv(*args))


@dataclass(frozen=True)
class GatewaySpec:
    host: str = "127.0.0.1"
    port: int = 30100
    policy: str = "round_robin"
    python: str = ""
    prometheus_port: int = 0
    health_check_interval_s: int = 5
    extra_args: tuple[str, ...] = ()
    log_dir: str = ""
    stop_grace_s: float = 5.0

    @property
    def url(self) -> str:
        h = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://[{h}]:{self.port}" if ":" in h else f"http://{h}:{self.port}"


@dataclass(frozen=True)
class FleetSpec:
    name: str
    path: Path | None
    members: tuple[MemberSpec, ...]
    gateway: GatewaySpec | None = None
    poll_interval_s: float = 1.0
    status_interval_s: float = 10.0

    def member(self, name: str) -> MemberSpec:
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(f"no member {name!r} in fleet {self.name} (members: {', '.join(m.name for m in self.members)})")

    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.members)


def _check_type(tag: str, value: Any) -> bool:
    if tag == "str":
        return isinstance(value, str)
    if tag == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if tag == "float":  # nan / inf are no durations
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tag == "bool":
        return isinstance(value, bool)
    if tag == "strlist":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if tag == "strmap":
        return isinstance(value, dict) and all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value.values()
        )
    raise AssertionError(tag)


def _table(raw: Any, schema: dict[str, Any], where: str, errors: list[str]) -> dict[str, Any]:
    """Typed values of one table (defaults filled); problems appended as '<where> key: ...'."""
    out = {k: (list(d) if isinstance(d, list) else dict(d) if isinstance(d, dict) else d) for k, (_, d) in schema.items()}
    if not isinstance(raw, dict):
        errors.append(f"{where}: must be a table, got {type(raw).__name__}")
        return out
    for key, value in raw.items():
        if key not in schema:
            errors.append(f"{where} {key}: unknown key (known: {', '.join(schema)})")
        elif not _check_type(schema[key][0], value):
            errors.append(f"{where} {key}: expected {_WORDS[schema[key][0]]}, got {value!r}")
        else:
            out[key] = float(value) if schema[key][0] == "float" else value
    return out


def _url_problem(url: str) -> str | None:
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1].strip("/")) == 0:
        return f"must be an http:// or https:// URL, got {url!r}"
    return None


def _member(name: str, raw: Any, base: Path, errors: list[str]) -> MemberSpec | None:
    where = f"[members.{name}]"
    if not NAME_RE.match(name):
        errors.append(f"{where}: member names are letters, digits, '.', '_' or '-'")
    n0 = len(errors)
    v = _table(raw, MEMBER, where, errors)
    if len(errors) > n0:
        return None
    if bool(v["profile"]) == bool(v["url"]):
        errors.append(f"{where} profile: give exactly one of profile (a local or remote profile) or url (attach only)")
        return None
    kind = URL if v["url"] else (SSH if v["host"] else LOCAL)
    _kind_problems(where, kind, v, errors)
    _value_problems(where, kind, v, errors)
    profile = None
    ref = v["profile"]
    if kind == LOCAL:
        profile = _local_profile(where, ref, base, errors)
        if profile is None:
            return None
        ref = str(profile.path)
    if len(errors) > n0:
        return None
    log = Path(os.path.expanduser(v["log"])) if v["log"] else None
    if log is not None and not log.is_absolute():
        log = base / log
    return MemberSpec(
        name=name,
        kind=kind,
        profile_ref=ref,
        profile=profile,
        host=v["host"],
        url=v["url"].rstrip("/"),
        log=log,
        ssh_options=tuple(v["ssh_options"]),
        command=tuple(v["command"]),
        env=tuple((k, str(x)) for k, x in v["env"].items()),
        worker_url=v["worker_url"].rstrip("/"),
        gateway=v["gateway"],
        api_key_env=v["api_key_env"],
        admin_api_key_env=v["admin_api_key_env"],
    )


def _kind_problems(where: str, kind: str, v: dict[str, Any], errors: list[str]) -> None:
    """Keys that belong to another kind of member (url, local, remote)."""
    if v["host"] and kind == URL:
        errors.append(f"{where} host: a url member is attached over HTTP; host goes with profile (SSH)")
    for key in SSH_ONLY:
        if kind != SSH and v[key] != MEMBER[key][1]:
            errors.append(f"{where} {key}: only for remote members (host + profile)")
    if v["log"] and kind != URL:
        errors.append(f"{where} log: only for url members (a profile knows its own log)")


def _value_problems(where: str, kind: str, v: dict[str, Any], errors: list[str]) -> None:
    """Variable names, a remote command and URLs that cannot be."""
    for key in ("api_key_env", "admin_api_key_env"):
        if v[key] and not ENV_RE.match(v[key]):
            errors.append(f"{where} {key}: must be the NAME of an environment variable, got {v[key]!r}")
    for key, _value in v["env"].items():
        if not ENV_RE.match(key):
            errors.append(f"{where} env: {key!r} is not a valid environment variable name")
    if kind == SSH and not v["command"]:
        errors.append(f"{where} command: must not be empty (the specconsole command on {v['host']})")
    if kind == SSH and v["host"].startswith("-"):
        errors.append(f"{where} host: must not start with '-', got {v['host']!r}")
    for key in ("url", "worker_url"):
        if v[key] and (problem := _url_problem(v[key])):
            errors.append(f"{where} {key}: {problem}")


def _local_profile(where: str, ref: str, base: Path, errors: list[str]) -> Profile | None:
    """A local member's profile (a relative path from the fleet file's folder first), or None (said)."""
    candidate = Path(os.path.expanduser(ref))
    path = find_profile(str(base / candidate) if not candidate.is_absolute() and (base / candidate).exists() else ref)
    try:
        return load_profile(path)
    except ProfileError as exc:
        errors.append(f"{where} profile: " + str(exc).replace("\n", "\n    "))
        return None


def _gateway(raw: Any, errors: list[str]) -> GatewaySpec:
    v = _table(raw, GATEWAY, "[gateway]", errors)
    if not 1 <= v["port"] <= 65535:
        errors.append(f"[gateway] port: must be 1..65535, got {v['port']}")
    if not 0 <= v["prometheus_port"] <= 65535:
        errors.append(f"[gateway] prometheus_port: must be 0 (a free port) or 1..65535, got {v['prometheus_port']}")
    if v["policy"] not in GATEWAY_POLICIES:
        errors.append(f"[gateway] policy: must be one of {', '.join(GATEWAY_POLICIES)}, got {v['policy']!r}")
    if v["health_check_interval_s"] < 1:
        errors.append(f"[gateway] health_check_interval_s: must be >= 1, got {v['health_check_interval_s']}")
    if v["stop_grace_s"] < 0:
        errors.append(f"[gateway] stop_grace_s: must be >= 0, got {v['stop_grace_s']}")
    return GatewaySpec(**{**v, "extra_args": tuple(v["extra_args"])})


def _clashes(members: list[MemberSpec], gateway: GatewaySpec | None) -> list[str]:
    """Two local members (or a member and the gateway) on one host:port cannot both run."""
    errors: list[str] = []
    seen: dict[tuple[str, int], str] = {}
    for m in members:
        if m.profile is None:
            continue
        key = (m.profile.connect_host, m.profile.port)
        if key in seen:
            errors.append(f"[members.{m.name}] profile: port {m.profile.port} is also the port of member {seen[key]}")
        seen[key] = m.name
        if gateway is not None and gateway.port == m.profile.port:
            errors.append(f"[gateway] port: {gateway.port} is the port of member {m.name}")
    names = [m.profile.name for m in members if m.profile is not None]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        errors.append(f"members: profile name {dup!r} is used by two local members (one run record each)")
    return errors


def parse_fleet(data: dict[str, Any], path: str | Path | None = None, stem: str = "fleet") -> FleetSpec:
    where = str(path) if path is not None else "<fleet>"
    base = Path(path).resolve().parent if path is not None else Path.cwd()
    errors: list[str] = nul_problems(data)
    for key in data:
        if key not in TOP and key not in ("members", "gateway"):
            errors.append(f"{key}: unknown key (known: {', '.join(TOP)}, [gateway], [members.NAME])")
    top = _table({k: data[k] for k in TOP if k in data}, TOP, "", errors)
    errors = [e.lstrip() for e in errors]
    name = top["name"] if top["name"] is not None else stem
    if not isinstance(name, str) or not NAME_RE.match(name):
        errors.append(f"name: must be letters, digits, '.', '_' or '-', got {name!r}")
    for key in ("poll_interval_s", "status_interval_s"):
        if top[key] < 0.05:
            errors.append(f"{key}: must be >= 0.05 s, got {top[key]}")
    raw_members = data.get("members")
    members: list[MemberSpec] = []
    if not isinstance(raw_members, dict) or not raw_members:
        errors.append("members: at least one member is needed: [members.NAME] with profile = ... or url = ...")
    else:
        for mname, raw in raw_members.items():
            m = _member(mname, raw, base, errors)
            if m is not None:
                members.append(m)
    gateway = _gateway(data["gateway"], errors) if "gateway" in data else None
    errors += _clashes(members, gateway)
    if errors:
        keys = tuple(e.split(":", 1)[0] for e in errors)
        if len(errors) == 1:
            raise FleetError(f"{where}: {errors[0]}", path, keys)
        raise FleetError(f"{where}: {len(errors)} problems:\n  " + "\n  ".join(errors), path, keys)
    return FleetSpec(
        name=name,
        path=Path(path).resolve() if path is not None else None,
        members=tuple(members),
        gateway=gateway,
        poll_interval_s=top["poll_interval_s"],
        status_interval_s=top["status_interval_s"],
    )


def load_fleet(path: str | Path) -> FleetSpec:
    """Read and validate a fleet file: a path, or the name of a shipped one (assets/fleets)."""
    p = Path(os.path.expanduser(str(path)))
    if not p.exists() and os.sep not in str(path) and not str(path).endswith(".toml"):
        from server_control.config.assets import assets_dir

        shipped = assets_dir() / "fleets" / f"{path}.toml"
        p = shipped if shipped.exists() else p
    try:
        data = tomllib.loads(read_regular(p, MAX_FLEET_BYTES).decode("utf-8"))
    except OSError as exc:
        raise FleetError(f"{p}: cannot read fleet file ({exc.strerror or exc})", p) from None
    except UnicodeDecodeError as exc:
        raise FleetError(f"{p}: not UTF-8 text ({exc})", p) from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetError(f"{p}: invalid TOML: {exc}", p) from None
    except (RecursionError, MemoryError, ValueError) as exc:  # nested too deep, ...: still a bad file
        raise FleetError(f"{p}: invalid TOML: {type(exc).__name__}: {str(exc)[:200]}", p) from None
    return parse_fleet(data, p, p.stem)
