"""What `specconsole supervise` says: a line (or a JSON event) per change of its run worth
saying, and its role (supervising, or watching whom)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from server_control.supervision.ownership import ROLE_WORDS
from server_control.supervision.supervisor import Supervisor


def reporter(args, profile, last: dict) -> Callable[[Supervisor], None]:
    """The supervisor's ``on_change``: a line (or a JSON event) per change worth saying;
    ``last`` keeps what was said."""

    def report(sup: Supervisor) -> None:
        key = (
            sup.state,
            sup.restarts,
            sup.record.pid if sup.record else None,
            sup.supervising,
            sup.next_restart_at,
            sup.runtime_note,
            sup.ownership.cannot_lock,
        )
        if last.get("key") == key:
            return
        last["key"] = key
        snap = sup.status_json()
        if args.json:
            print(json.dumps({"event": "state", "profile": profile.name, "time": time.time(), **snap}), flush=True)
            return
        bits = [f"{profile.name}: {sup.state}"]
        if snap["pid"]:
            bits.append(f"pid {snap['pid']}")
        if sup.restarts:
            bits.append(f"restarts {sup.restarts}")
        if snap["next_restart_in_s"] is not None:
            bits.append(f"restart in {snap['next_restart_in_s']:g} s")
        if sup.last_error:
            bits.append(sup.last_error)
        line = "  ".join(bits)
        if last.get("line") != line:  # e.g. only `supervising` changed: said below
            last["line"] = line
            print(f"{time.strftime('%H:%M:%S')}  {line}", flush=True)
        report_note_and_role(sup, profile, last)

    return report


def report_note_and_role(sup: Supervisor, profile, last: dict) -> None:
    if sup.runtime_note and last.get("note") != sup.runtime_note:  # re-applied (or not) after a restart
        last["note"] = sup.runtime_note
        print(f"{time.strftime('%H:%M:%S')}  {profile.name}: {sup.runtime_note}", flush=True)
    cannot = sup.ownership.cannot_lock
    if "supervising" in last and cannot is not None and last.get("cannot_lock") != cannot:  # after the first words
        print(f"{time.strftime('%H:%M:%S')}  {profile.name}: {cannot}; a crash is said, not restarted", flush=True)
    last["cannot_lock"] = cannot
    if "supervising" in last and last["supervising"] != sup.supervising:  # after the first words
        last["supervising"] = sup.supervising
        print(
            f"{time.strftime('%H:%M:%S')}  {profile.name}: "
            + ("now supervising (took over the restart lock)" if sup.supervising else "no longer supervising"),
            flush=True,
        )


def role_line(sup: Supervisor) -> str:
    if sup.supervising:
        return "supervising (Ctrl-C detaches and leaves the server running)"
    if sup.ownership.cannot_lock is not None:
        return f"watching only: {sup.ownership.cannot_lock}; a crash is said, not restarted (Ctrl-C leaves)"
    who = sup.supervisor_of()
    holder = f"{ROLE_WORDS.get(who.kind, who.kind)} pid {who.pid}" if who else "another process"
    return (
        f"watching only: {holder} supervises this run and restarts its crashes; this process "
        "takes over if it stops (Ctrl-C leaves)"
    )
