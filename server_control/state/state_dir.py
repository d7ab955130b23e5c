"""Where specconsole keeps its state: run records, locks and run logs.

``$SPECCONSOLE_STATE_DIR`` when set, else platformdirs' ``user_state_dir("specconsole")``.
Every command and the console resolve it here, so they always agree.

Like ssh with a loose key file, a state directory (or a directory in it, ``private_dir``)
that is group- or world-writable or owned by another user is refused (``StateDirError``,
which says how to fix it): whoever can write there could plant a run record that makes
specconsole signal a process of their choice.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

STATE_DIR_ENV = "SPECCONSOLE_STATE_DIR"


class StateDirError(ValueError):
    """The state directory (or a directory in it) is unsafe or unusable; says how to fix it."""


def check_private_dir(path: Path) -> Path:
    """Refuse a directory that others can write to or that another user owns."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise StateDirError(f"state directory {path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateDirError(f"state directory {path} is not a directory")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o022:
        real = os.path.realpath(path)
        if real != os.path.abspath(path):  # a symlink (to /tmp, say): never advise chmod on its target
            raise StateDirError(
                f"state directory {path} is a link to {real}, which is group- or world-writable (mode "
                f"{mode:04o}): others could plant run records there; point {STATE_DIR_ENV} at a private "
                "directory of your own instead"
            )
        raise StateDirError(
            f"state directory {path} is group- or world-writable (mode {mode:04o}): others could "
            f"plant run records there; fix it with: chmod go-w {path}"
        )
    if st.st_uid != os.geteuid():
        raise StateDirError(
            f"state directory {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); use your own ({STATE_DIR_ENV})"
        )
    return path


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (0700) if needed and check it (see ``check_private_dir``)."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise StateDirError(f"cannot create state directory {p}: {exc.strerror or exc}") from None
    return check_private_dir(p)


def resolve_state_dir(state_dir: str | Path | None = None, *, create: bool = True) -> Path:
    """The state dir (``state_dir`` if given); created 0700 unless ``create`` is False;
    checked whenever it exists."""
    if state_dir is None:
        state_dir = os.environ.get(STATE_DIR_ENV) or None
    if state_dir is None:
        import platformdirs  # noqa: PLC0415 - only when no directory is given

        state_dir = platformdirs.user_state_dir("specconsole")
    p = Path(os.path.expanduser(str(state_dir)))
    if create:
        return private_dir(p)
    return check_private_dir(p) if p.exists() else p
