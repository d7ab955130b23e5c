"""What the console remembers between runs for this user: the theme chosen in the palette,
and a keymap that rebinds actions by their binding ids (console/keys.py: the action
names), e.g. ``{"keymap": {"threshold_up": "u", "threshold_down": "d,minus"}}``.

Kept in ``<state dir>/console.json`` (private, written atomically); a missing or unreadable
file means the defaults, never an error on screen; a keymap entry that names no action or
gives no keys is left out and said once, naming the entry and the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from server_control.state.private_files import atomic_write
from server_control.state.state_dir import resolve_state_dir

FILE = "console.json"
MAX_BYTES = 64 * 1024


def prefs_path() -> Path | None:
    try:
        return resolve_state_dir() / FILE
    except (OSError, ValueError):
        return None


def load_prefs(path: Path | None = None) -> dict[str, Any]:
    path = path or prefs_path()
    try:
        if path is None or path.stat().st_size > MAX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def load_theme() -> str | None:
    theme = load_prefs().get("theme")
    return theme if isinstance(theme, str) else None


def save_theme(theme: str) -> None:
    """Remember the theme; the rest of the file (the keymap) is kept."""
    path = prefs_path()
    if path is None:
        return
    try:
        atomic_write(path, json.dumps({**load_prefs(path), "theme": theme}) + "\n")
    except OSError:
        pass


def load_keymap(known: frozenset[str], path: Path | None = None) -> tuple[dict[str, str], list[str]]:
    """The user's keymap (binding id -> keys, comma separated) and what was left out, why."""
    path = path or prefs_path()
    raw = load_prefs(path).get("keymap")
    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [f"{path}: keymap must be an object of action name -> keys"]
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for name, keys in raw.items():
        if name not in known:
            problems.append(f"{path}: keymap.{name}: no such action (see `?` for the names)")
        elif not isinstance(keys, str) or not keys.strip():
            problems.append(f'{path}: keymap.{name}: keys must be a non-empty string such as "u" or "u,ctrl+u"')
        else:
            keymap[name] = keys.replace(" ", "")
    return keymap, problems
