"""Leaving the fleet console (`q`, or the terminal going away): as on the single-server
screen, Enter leaves every server running and nothing goes unsupervised that can be handed
on: each local member this console supervised is handed to a detached `specconsole
supervise` of its profile (console/handoff.py); remote members are their hosts' (they run
their own `supervise`); the gateway keeps routing, and the next fleet console adopts it
(nobody restarts a gateway crash in between: the dialog says so). `s` stops every member
and the gateway."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from console.dialogs.confirm import ChoiceScreen
from console.handoff import HandOff, hand_off


@dataclass(frozen=True)
class MemberHandOff:
    member: str
    handed: HandOff | None
    why: str = ""  # why not, when ``handed`` is None; else what the hand-off does not carry

    def words(self) -> str:
        if self.handed is not None:
            return f"{self.member}: {self.handed.words()}" + (f" ({self.why})" if self.why else "")
        return f"{self.member}: not handed off ({self.why})"


def quit_question(fleet) -> ChoiceScreen:
    local = [m.name for m in fleet.members.values() if m.spec.kind == "local"]
    gateway = (
        " The gateway keeps routing; nobody restarts it if it crashes until the next fleet console."
        if fleet.gateway is not None
        else ""
    )
    return ChoiceScreen(
        f"Quit the fleet console. Leave the fleet running?\n\nLeave: every server keeps serving; "
        f"{len(local)} local member(s) are handed each to a detached `specconsole supervise` (it restarts a "
        f"crash) until the next console takes them back; remote members stay with their hosts.{gateway}\n"
        "Stop: stop every member" + (" and the gateway" if fleet.gateway is not None else "") + " now.",
        [("l", "Leave fleet running", "leave"), ("s", "Stop fleet", "stop"), ("c", "Cancel", None)],
        default=0,
        cancel_value=None,
    )


def hand_off_fleet(fleet) -> list[MemberHandOff]:
    """After the fleet closed: hand each local member that this console supervised and that
    runs on to a detached supervise of its profile file."""
    from server_control.config.profile import ProfileError, load_profile  # noqa: PLC0415

    out = []
    for m in fleet.members.values():
        run = getattr(m.session, "run", None)
        sup = getattr(run, "sup", None)
        if (
            m.spec.kind != "local"
            or sup is None
            or not (getattr(run, "needs_handoff", False) or getattr(run, "supervises_live_run", False))
        ):
            continue
        profile = m.spec.profile
        path = getattr(profile, "path", None)
        try:
            on_disk = load_profile(path) if path else None
        except (ProfileError, OSError):
            on_disk = None
        if on_disk is None or on_disk.name != profile.name:
            out.append(MemberHandOff(m.name, None, "its profile exists only in this console"))
            continue
        args = ["--profile", str(path), "--state-dir", str(sup.state_dir)]
        if on_disk.port != profile.port:  # moved off a busy port (the demo fleet): restarts keep the run's
            args += ["--port", str(profile.port)]
        if dataclasses.replace(on_disk, server={**on_disk.server, "port": profile.port}) != profile:
            why = "settings changed here besides the port (a demo time scale) are not carried: a restart uses the profile file's"
            out.append(MemberHandOff(m.name, hand_off(m.session, args), why))
            continue
        out.append(MemberHandOff(m.name, hand_off(m.session, args)))
    return out
