"""A run must always be findable: a record that is missing or unreadable while its server
runs is recovered from the keeper's start note (``runs/<name>.exit`` with ``returncode``
null and the record as launched: server_control/keeper.py); when even that fails, what
listens on the profile's port is named instead of "not running".
"""

from __future__ import annotations

from pathlib import Path

from server_control.host import ports
from server_control.state import runs

STILL_LISTENING = "still listening on port"


def load_or_recover(name: str, state_dir: str | Path | None, port: int) -> tuple[runs.RunRecord | None, str]:
    """(the run record or None, what happened for the operator: "" when nothing unusual).
    An unreadable record is moved aside (``<name>.json.bad``); a recovered one is rewritten."""
    try:
        rec = runs.load_record(name, state_dir)
        if rec is not None:
            return rec, ""
        why, unreadable = "the run record was missing", False
    except runs.RunRecordError as exc:
        bad = runs.quarantine_record(name, state_dir)
        why = f"unreadable run record {'moved aside to ' + str(bad) if bad else 'left in place'}: {exc}"
        unreadable = True
    found = runs.recover_record(name, state_dir)
    if found is None:
        if not unreadable:
            return None, ""
        held = ports.listeners(port)
        if held:
            why += f"; {STILL_LISTENING} {port}: " + ", ".join(f"pid {pid} ({cmd})" for pid, cmd in held)
        return None, why
    rec, keeper = found
    try:
        runs.save_record(rec, state_dir)
        kept = "record rewritten"
    except OSError as exc:
        kept = f"record NOT rewritten: {exc.strerror or exc}"
    return rec, (
        f"{why}; the live run was found by its keeper's note: pid {rec.pid}, keeper "
        f"{keeper if keeper else '?'} ({kept}; settings changed at runtime since its launch are not known)"
    )
