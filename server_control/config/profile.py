"""TOML profile -> validated ``Profile`` -> ``LaunchSpec`` (the exact argv and environment).

    profile = load_profile(path)            # raises ProfileError naming the file and the key
    spec = profile.launch_spec(state_dir)   # argv, env (full), env_overrides, log_path, cwd
    profile.check_port()                    # raises ProfileError if host:port is taken

The schema (every key optional unless said otherwise) is documented in
docs/architecture.md, "Profiles (TOML)". Unknown keys, wrong types and out-of-range values
are errors; all errors of a file are reported together, one line each, as
``<file>: [section] key: <what is wrong>``.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from server_control.config.schema import log_mode, validate
from server_control.protocol import decision
from server_control.protocol.keys import ADMIN_API_KEY_ENV, API_KEY_ENV
from server_control.state.private_files import read_regular
from server_control.state.run_logs import log_dir_problem
from server_control.state.state_dir import resolve_state_dir

SERVE_MODULES = {"sim": "server_control.sim", "sglang": "server_control.sglang_patch.serve"}
DEFAULT_STOP_GRACE = {"sim": 5.0, "sglang": 30.0}
MASK = "****"
MAX_PROFILE_BYTES = 1 << 20  # a profile is a page of TOML: /dev/zero or a FIFO is refused, not read
SIM_DEFAULT_MODEL = "sim/model"  # the simulator needs some --model-path
_SECRET_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)


class ProfileError(ValueError):
    """A profile is invalid. ``str(err)`` names the file and every offending key."""

    def __init__(self, message: str, path: str | Path | None = None, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.path = str(path) if path is not None else None
        self.keys = keys


def is_placeholder(value: str) -> bool:
    """The stand-in ``--dry-run`` shows for a key whose variable is unset."""
    return value.startswith("<$") and value.endswith(" unset>")


@dataclass(frozen=True)
class LaunchSpec:
    argv: tuple[str, ...]
    env: dict[str, str] = field(repr=False)  # the full environment to pass to Popen
    env_overrides: dict[str, str]  # what the profile (and launcher) adds
    log_path: Path
    cwd: Path
    secrets: tuple[str, ...] = field(default=(), repr=False)
    exit_file: Path | None = None  # where the keeper records how the server ended
    log_mode: int = 0o600
    log_max_bytes: int = 0  # rotate the log at this size (0: never)
    log_keep_rotated: int = 3

    def masked_argv(self) -> list[str]:
        return [MASK if a in self.secrets else a for a in self.argv]

    def masked_env_overrides(self) -> dict[str, str]:
        return {
            k: (MASK if (_SECRET_RE.search(k) or v in self.secrets) and not is_placeholder(v) else v)
            for k, v in self.env_overrides.items()
        }

    def command_line(self) -> str:
        """The argv, shell-quoted, secrets masked."""
        return shlex.join(self.masked_argv())


@dataclass(frozen=True)
class Profile:
    name: str
    path: Path | None
    server: dict[str, Any]
    speculative: dict[str, Any]
    dynamic: dict[str, Any]
    restart: dict[str, Any]
    health: dict[str, Any]
    env: dict[str, str]
    sim: dict[str, Any]

    # -- convenience ------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return str(self.server["kind"])

    @property
    def host(self) -> str:
        return str(self.server["host"])

    @property
    def port(self) -> int:
        return int(self.server["port"])

    @property
    def connect_host(self) -> str:
        """Where a client on this machine reaches the server (wildcard binds -> loopback)."""
        h = self.host
        return "127.0.0.1" if h in ("0.0.0.0", "", "::", "[::]") else h

    @property
    def url(self) -> str:
        h = self.connect_host
        return f"http://[{h}]:{self.port}" if ":" in h else f"http://{h}:{self.port}"

    @property
    def stop_grace_s(self) -> float:
        g = self.restart["stop_grace_s"]
        return DEFAULT_STOP_GRACE[self.kind] if g is None else g

    def _err(self, key: str, msg: str) -> ProfileError:
        return ProfileError(f"{self.path or '<profile>'}: {key}: {msg}", self.path, (key,))

    def _secret(self, section_key: str, preview: list[str] | None = None) -> str | None:
        """The value of the env var the profile names. With ``preview`` (a list collecting
        warnings, for --dry-run) a missing one becomes a visible placeholder, not an error."""
        var = self.server[section_key]
        if not var:
            return None
        value = os.environ.get(var)
        if not value:
            err = self._err(f"[server] {section_key}", f"environment variable {var} (named here) is not set or empty")
            if preview is None:
                raise err
            preview.append(str(err))
            return f"<${var} unset>"
        return value

    def api_key(self, preview: list[str] | None = None) -> str | None:
        """The API key from the environment variable the profile names (None if none)."""
        return self._secret("api_key_env", preview)

    def admin_api_key(self, preview: list[str] | None = None) -> str | None:
        return self._secret("admin_api_key_env", preview)

    def base_dir(self) -> Path:
        return self.path.parent if self.path else Path.cwd()

    def log_dir(self, state_dir: Path) -> Path:
        d = self.server["log_dir"]
        if not d:
            return Path(state_dir) / "logs" / self.name
        p = Path(os.path.expanduser(d))
        return p if p.is_absolute() else self.base_dir() / p

    def python(self, preview: list[str] | None = None) -> str:
        try:
            return self._python()
        except ProfileError as err:
            if preview is None:
                raise
            preview.append(str(err))
            return str(self.server["python"])

    def _python(self) -> str:
        py = self.server["python"]
        if not py:
            return sys.executable
        expanded = os.path.expanduser(py)
        if os.sep in expanded:
            p = Path(expanded) if os.path.isabs(expanded) else self.base_dir() / expanded
            if not (p.is_file() and os.access(p, os.X_OK)):
                raise self._err("[server] python", f"{p} is not an executable file")
            return str(p)
        found: str | None = shutil.which(expanded)
        if not found:
            raise self._err("[server] python", f"{py!r} not found on PATH")
        return found

    # -- the command ------------------------------------------------------------------------
    def server_args(self, preview: list[str] | None = None) -> list[str]:
        """The launch_server flags. API keys are not among them: they travel in the
        environment (``launch_spec``; server_control/protocol/keys.py), never on a
        command line that every user of the host can read."""
        s, sp, dy = self.server, self.speculative, self.dynamic
        args: list[str] = []
        model = s["model_path"] or (SIM_DEFAULT_MODEL if self.kind == "sim" else "")
        if model:
            args += ["--model-path", model]
        args += ["--host", s["host"], "--port", str(s["port"]), "--tp-size", str(s["tp_size"])]
        if s["dp_size"] != 1:
            args += ["--dp-size", str(s["dp_size"])]
        if sp["algorithm"]:
            args += ["--speculative-algorithm", sp["algorithm"]]
            if sp["draft_model_path"]:
                args += ["--speculative-draft-model-path", sp["draft_model_path"]]
            args += [
                "--speculative-num-steps",
                str(sp["num_steps"]),
                "--speculative-eagle-topk",
                str(sp["eagle_topk"]),
                "--speculative-num-draft-tokens",
                str(sp["num_draft_tokens"]),
            ]
        args += [
            "--speculative-disable-batch-threshold",
            str(dy["threshold"]),
            "--speculative-disable-hysteresis",
            str(dy["hysteresis"]),
            "--speculative-disable-min-dwell-steps",
            str(dy["min_dwell_steps"]),
        ]
        if dy["force_mode"] != decision.AUTO:
            args += ["--speculative-disable-force-mode", dy["force_mode"]]
        if self.kind == "sim":
            for k, v in self.sim.items():
                flag = "--sim-" + k.replace("_", "-")
                if v is True:
                    args.append(flag)
                elif v is not False:
                    args += [flag, str(v)]
        args += list(s["extra_args"])
        return args

    def next_log_path(self, state_dir: Path) -> Path:
        """``<log dir>/<YYYYmmdd-HHMMSS>-<n>.log``; n = 1 + the highest n already there."""
        import time

        d = self.log_dir(state_dir)
        n = 0
        if d.is_dir():
            for p in d.glob("*-*.log"):
                tail = p.stem.rsplit("-", 1)[-1]
                if tail.isdigit():
                    n = max(n, int(tail))
        return d / f"{time.strftime('%Y%m%d-%H%M%S')}-{n + 1}.log"

    def _check_log_dir(self, state_dir: Path, preview: list[str] | None) -> None:
        problem = log_dir_problem(self.log_dir(state_dir))
        if problem is not None:
            err = self._err("[server] log_dir", f"no log file can be created there: {problem}")
            if preview is None:
                raise err
            preview.append(str(err))

    def launch_spec(self, state_dir: str | Path | None = None, preview: list[str] | None = None) -> LaunchSpec:
        """The exact command and environment. ``preview`` (for --dry-run): a list that
        collects what would stop a real launch (unset key variables, a missing python)
        instead of raising, so the operator still sees the whole command."""
        sd = resolve_state_dir(state_dir)
        self._check_log_dir(sd, preview)
        argv = (self.python(preview), "-m", SERVE_MODULES[self.kind], *self.server_args(preview))
        overrides = dict(self.env)
        overrides.setdefault("PYTHONUNBUFFERED", "1")
        for var, value in ((API_KEY_ENV, self.api_key(preview)), (ADMIN_API_KEY_ENV, self.admin_api_key(preview))):
            if value:
                overrides[var] = value
        pkg_root = str(Path(__file__).resolve().parents[2])  # the directory holding server_control
        base = dict(os.environ)
        for var in (self.server["api_key_env"], self.server["admin_api_key_env"]):
            base.pop(var, None)  # the key travels once, as SPECCONSOLE_*; the server removes that
        prev = overrides.get("PYTHONPATH", base.get("PYTHONPATH", ""))
        rest = [p for p in prev.split(os.pathsep) if p != pkg_root] if prev else []  # said once, first
        overrides["PYTHONPATH"] = os.pathsep.join([pkg_root, *rest])
        env = {**base, **overrides}
        cwd_s = self.server["cwd"]
        cwd = Path(os.path.expanduser(cwd_s)) if cwd_s else self.base_dir()
        if not cwd.is_absolute():
            cwd = self.base_dir() / cwd
        if not cwd.is_dir():
            raise self._err("[server] cwd", f"{cwd} is not a directory")
        secrets = tuple(v for v in (self.api_key(preview), self.admin_api_key(preview)) if v and not is_placeholder(v))
        s = self.server
        return LaunchSpec(
            argv=argv,
            env=env,
            env_overrides=overrides,
            log_path=self.next_log_path(sd),
            cwd=cwd,
            secrets=secrets,
            log_mode=log_mode(s["log_mode"]),
            log_max_bytes=int(s["log_rotate_mb"] * 1e6),
            log_keep_rotated=s["log_rotate_keep"],
        )

    def check_port(self) -> None:
        """Raise ProfileError if something already listens on host:port."""
        host, port = self.host, self.port
        fam = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        with socket.socket(fam, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host.strip("[]"), port))
            except OSError as exc:
                raise self._err("[server] port", f"{host}:{port} is busy or cannot be bound ({exc.strerror or exc})") from None


def parse_profile(data: dict[str, Any], path: str | Path | None = None, stem: str = "profile") -> Profile:
    """Validate an already-parsed TOML document."""
    where = str(path) if path is not None else "<profile>"
    out, errors = validate(data, stem)
    if errors:
        keys = tuple(err.split(":", 1)[0] for err in errors)
        if len(errors) == 1:
            raise ProfileError(f"{where}: {errors[0]}", path, keys)
        raise ProfileError(f"{where}: {len(errors)} problems:\n  " + "\n  ".join(errors), path, keys)
    return Profile(
        name=out["name"],
        path=Path(path).resolve() if path is not None else None,
        server=out["server"],
        speculative=out["speculative"],
        dynamic=out["dynamic"],
        restart=out["restart"],
        health=out["health"],
        env=out["env"],
        sim=out["sim"],
    )


def load_profile(path: str | Path) -> Profile:
    """Read and validate a TOML profile. Raises ProfileError (file and key named)."""
    p = Path(os.path.expanduser(str(path)))
    try:
        raw = read_regular(p, MAX_PROFILE_BYTES)
    except OSError as exc:
        raise ProfileError(f"{p}: cannot read profile ({exc.strerror or exc})", p) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{p}: not UTF-8 text ({exc})", p) from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{p}: invalid TOML: {exc}", p) from None
    except (RecursionError, MemoryError, ValueError) as exc:  # nested too deep, ...: still a bad file
        raise ProfileError(f"{p}: invalid TOML: {type(exc).__name__}: {str(exc)[:200]}", p) from None
    return parse_profile(data, p, p.stem)


def find_profile(arg: str | None = None) -> Path:
    """The profile to use: ``arg`` (a path, or the name of a shipped profile such as
    "demo"), else ``$SPECCONSOLE_PROFILE``, else the shipped demo profile."""
    from server_control.config.assets import profile_path

    choice = arg or os.environ.get("SPECCONSOLE_PROFILE") or ""
    if not choice:
        return profile_path("demo")
    p = Path(os.path.expanduser(choice))
    if p.exists() or os.sep in choice or choice.endswith(".toml"):
        return p
    shipped = profile_path(choice)
    return shipped if shipped.exists() else p
