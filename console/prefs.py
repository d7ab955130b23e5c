"""What the console remembers between runs for this user: the theme chosen in the palette.

Kept in ``<state dir>/console.json`` (private, written atomically); a missing or unreadable
file means the defaults, never an error on screen."""
from __future__ import annotations

import json
from pathlib import Path

from server_control.state.private_files import atomic_write
from server_control.state.state_dir import resolve_state_dir

FILE = "console.json"


def prefs_path() -> Path | None:
    try:
        return resolve_state_dir() / FILE
    except (OSError, ValueError):
        return None


def load_theme() -> str | None:
    path = prefs_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path is not None else {}
    except (OSError, ValueError):
        return None
    theme = data.get("theme") if isinstance(data, dict) else None
    return theme if isinstance(theme, str) else None


def save_theme(theme: str) -> None:
    path = prefs_path()
    if path is None:
        return
    try:
        atomic_write(path, json.dumps({"theme": theme}) + "\n")
    except OSError:
        pass
