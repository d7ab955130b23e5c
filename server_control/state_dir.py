"""Where specconsole keeps its state: run records, locks and run logs.

``$SPECCONSOLE_STATE_DIR`` when set, else platformdirs' ``user_state_dir("specconsole")``.
Every command and the console resolve it here, so they always agree.
"""
from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "SPECCONSOLE_STATE_DIR"


def resolve_state_dir(state_dir: str | Path | None = None, *, create: bool = True) -> Path:
    """The state dir (``state_dir`` if given); created 0700 unless ``create`` is False."""
    if state_dir is None:
        state_dir = os.environ.get(STATE_DIR_ENV) or None
    if state_dir is None:
        import platformdirs  # noqa: PLC0415 - only when no directory is given

        state_dir = platformdirs.user_state_dir("specconsole")
    p = Path(os.path.expanduser(str(state_dir)))
    if create:
        p.mkdir(parents=True, exist_ok=True, mode=0o700)
    return p
