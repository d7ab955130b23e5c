"""Leaving the fleet console (`q`, or the terminal going away): as on the single-server
screen, Enter leaves every server running: each local member keeps its own detached
`specconsole supervise` (console/run_supervisor.py), started with it, which restarts its
crashes with or without a console; remote members are their hosts'; the gateway keeps
routing, and the next fleet console adopts it (nobody restarts a gateway crash in between:
the dialog says so). `s` stops every member and the gateway."""

from __future__ import annotations

from console.dialogs.confirm import ChoiceScreen


def supervised_words(fleet) -> str:
    """How many local members have a supervisor now, in words."""
    local = [m for m in fleet.members.values() if m.spec.kind == "local"]
    kept = [m for m in local if m.session.snapshot().run.supervisor is not None]
    return f"{len(kept)} of {len(local)} local member(s) have their own supervisor (it restarts a crash)"


def quit_question(fleet) -> ChoiceScreen:
    gateway = (
        " The gateway keeps routing; nobody restarts it if it crashes until the next fleet console."
        if fleet.gateway is not None
        else ""
    )
    return ChoiceScreen(
        f"Quit the fleet console. Stop the fleet too?\n\nLeave: every server keeps serving; "
        f"{supervised_words(fleet)}; remote members stay with their hosts.{gateway}\n"
        "Stop: stop every member" + (" and the gateway" if fleet.gateway is not None else "") + " now.",
        [("l", "Leave fleet running", "leave"), ("s", "Stop fleet", "stop"), ("c", "Cancel", None)],
        default=0,
        cancel_value=None,
    )
