"""SGLang's parser's "takes it", kept. Asking the parser imports SGLang's server arguments in
the profile's interpreter (6-8 s on an idle 2-core host, more where torch finds CUDA), and
its answer depends only on what that interpreter finds and on the command line. So a yes is
kept, under a SHA-256 of (a *stamp* of the interpreter's SGLang and patch, the command line),
and a launch whose key was said yes to within ``MAX_AGE_S`` skips the ask.

The stamp is read by a cheap probe in the same interpreter, environment and directory as
the ask (``STAMP_PROBE``: ``find_spec`` and ``os.stat``, nothing imported): the
interpreter, its version, the SGLang package's directory, the stat of its
``srt/server_args.py`` and of its ``dist-info/RECORD`` (rewritten by every install), the
stat of every file of the patch it would install, and the ``SGLANG_*`` environment. A
reinstall, an upgrade, another venv, an edited patch or server_args.py: another key, asked
again. Not seen: a hand edit of another SGLang file that changes the parser; the age limit
bounds that, and ``SPECCONSOLE_PARSE_VERDICTS=off`` asks every time.

Only yeses are kept, as hashes: a refusal's message may quote the command line (keys
included), and is asked again next time. The file lives in specconsole's cache directory
(``$SPECCONSOLE_CACHE_DIR``, else platformdirs' ``user_cache_dir``), private like the state
directory; an unreadable or damaged file is a miss, never an error."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from server_control.state.private_files import atomic_write, read_regular
from server_control.state.state_dir import StateDirError, check_private_dir, private_dir

CACHE_DIR_ENV = "SPECCONSOLE_CACHE_DIR"
SWITCH_ENV = "SPECCONSOLE_PARSE_VERDICTS"  # "off": ask SGLang's parser every time
FILE_NAME = "parse-verdicts.json"
MAX_AGE_S = 7 * 24 * 3600.0
MAX_ENTRIES = 256
MAX_FILE_BYTES = 1 << 20
STAMP_TIMEOUT_S = 20.0
MAX_STAMP_BYTES = 256 * 1024

STAMP_PROBE = """\
import importlib.util as u, json, os, sys
def st(p):
    try:
        s = os.stat(p)
        return [p, s.st_mtime_ns, s.st_size]
    except OSError:
        return [p, None, None]
out = {"python": [sys.executable, sys.version], "sglang": None, "patch": None,
       "env": sorted((k, v) for k, v in os.environ.items() if k.startswith("SGLANG"))}
s = u.find_spec("sglang")
if s is not None and s.submodule_search_locations:
    d = list(s.submodule_search_locations)[0]
    parent = os.path.dirname(d)
    rec = sorted(os.path.join(parent, n, "RECORD") for n in os.listdir(parent)
                 if n.startswith("sglang-") and n.endswith(".dist-info"))
    out["sglang"] = [d, st(os.path.join(d, "srt", "server_args.py"))] + [st(r) for r in rec]
c = u.find_spec("server_control")
if c is not None and c.submodule_search_locations:
    root = os.path.join(list(c.submodule_search_locations)[0], "sglang_patch")
    files = []
    for base, dirs, names in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        files += [st(os.path.join(base, n)) for n in sorted(names) if n.endswith(".py")]
    out["patch"] = files
print(json.dumps(out))
"""


@dataclass(frozen=True)
class KeptVerdict:
    key: str  # hex SHA-256 of (stamp, command line)
    at: float  # when SGLang's parser said yes (epoch s)


def enabled() -> bool:
    return os.environ.get(SWITCH_ENV, "").strip().lower() not in ("off", "0", "no", "false")


def cache_dir() -> Path:
    where = os.environ.get(CACHE_DIR_ENV) or None
    if where is None:
        import platformdirs  # noqa: PLC0415 - only when no directory is given

        where = platformdirs.user_cache_dir("specconsole")
    return Path(os.path.expanduser(where))


def read_stamp(python: str, env: dict[str, str] | None, cwd: str | Path | None) -> str | None:
    """The stamp of what ``python`` would parse with (a JSON text), None when it cannot be read
    (then nothing is kept or looked up: the parser is asked)."""
    try:
        out = subprocess.run(
            [python, "-c", STAMP_PROBE],
            capture_output=True,
            text=True,
            timeout=STAMP_TIMEOUT_S,
            env=env,
            cwd=cwd,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout[-MAX_STAMP_BYTES:].strip().splitlines()
    if out.returncode != 0 or not lines:
        return None
    try:
        stamp = json.loads(lines[-1])
    except ValueError:
        return None
    if not isinstance(stamp, dict) or not stamp.get("sglang") or not stamp.get("patch"):
        return None  # no SGLang or no patch there: the ask says why; nothing worth keeping
    return json.dumps(stamp, sort_keys=True)


def verdict_key(stamp: str, argv: list[str]) -> str:
    return hashlib.sha256(json.dumps([stamp, argv]).encode()).hexdigest()


def _read(path: Path) -> dict[str, float]:
    try:
        data = json.loads(read_regular(path, MAX_FILE_BYTES))  # a FIFO or a huge file: a miss
    except (OSError, ValueError):
        return {}
    kept = data.get("takes_it") if isinstance(data, dict) else None
    if not isinstance(kept, dict):
        return {}
    return {k: float(v) for k, v in kept.items() if isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)}


def lookup(key: str, now: float | None = None, directory: Path | None = None) -> KeptVerdict | None:
    """The kept yes for ``key``, if one is younger than ``MAX_AGE_S``."""
    where = directory or cache_dir()
    try:
        check_private_dir(where)  # a yes planted where others can write is not ours
    except StateDirError:
        return None
    at = _read(where / FILE_NAME).get(key)
    now = time.time() if now is None else now
    if at is None or not (now - MAX_AGE_S <= at <= now + 60.0):
        return None
    return KeptVerdict(key, at)


def keep(key: str, now: float | None = None, directory: Path | None = None) -> bool:
    """Keep a yes (False when the cache directory cannot be written: nothing else changes)."""
    now = time.time() if now is None else now
    try:
        where = private_dir(directory or cache_dir())
    except StateDirError:
        return False
    path = where / FILE_NAME
    kept = {k: at for k, at in _read(path).items() if now - MAX_AGE_S <= at <= now + 60.0}
    kept[key] = now
    newest = dict(sorted(kept.items(), key=lambda kv: kv[1])[-MAX_ENTRIES:])
    try:
        atomic_write(path, json.dumps({"takes_it": newest}))
    except OSError:
        return False
    return True
