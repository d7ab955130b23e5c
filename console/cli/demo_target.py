"""Where `specconsole demo` keeps its run and which port it takes, in one place, so the
screen can say it and the headless commands find it (`status --demo`, `stop --demo`, ...).

The demo's runs live in `<state dir>/demo` (`--state-dir DIR` names that dir itself), never
beside a real profile's run record, lock or logs. Its port: the live demo run's (a
simulator left running is adopted where it is), else the one asked for, else the profile's
(30000) if free, else a free one, and then the screen says why.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from server_control.host.ports import free_port
from server_control.state.state_dir import resolve_state_dir

if TYPE_CHECKING:
    from server_control.config.profile import Profile


class NoDemoRun(LookupError):
    """`specconsole demo` has no run in this state dir (a headless command has nothing to reach)."""


@dataclass(frozen=True)
class DemoTarget:
    profile: Profile
    state_dir: Path
    note: str = ""  # why the port is not the profile's own ("" when it is, or was asked for)

    def hint(self) -> str:
        """How a headless command reaches this run."""
        default = self.state_dir == demo_state_dir()
        return "specconsole status --demo" + ("" if default else f" --state-dir {self.state_dir}")


def demo_state_dir(arg: str | Path | None = None) -> Path:
    if arg:
        return resolve_state_dir(arg)
    return resolve_state_dir(None) / "demo"


def demo_target(state_dir: Path, port: int | None = None, time_scale: float = 1.0, existing: bool = False) -> DemoTarget:
    """The shipped demo profile on a usable port (see the module docstring). ``existing``
    (the headless commands that read or steer a run): the port of the demo's run record,
    live or not; no record raises NoDemoRun (never a port picked for a run that is not there)."""
    from server_control.config.assets import profile_path
    from server_control.config.profile import ProfileError, load_profile
    from server_control.state import runs

    profile = load_profile(profile_path("demo"))
    sim = dict(profile.sim)
    if time_scale != 1.0:
        sim["time_scale"] = time_scale
    try:
        rec = runs.load_record(profile.name, state_dir)
    except runs.RunRecordError:
        rec = None
    note = ""
    if rec is not None and rec.is_live():
        chosen = rec.port
        note = f"the demo simulator left running (pid {rec.pid}) is adopted on port {chosen}"
    elif existing:
        if rec is None:
            raise NoDemoRun(f"no demo run in {state_dir} (stopped, or never started): `specconsole demo` starts one")
        chosen = rec.port
    elif port is not None:
        chosen = port
    else:
        chosen = profile.port
        try:
            profile.check_port()
        except ProfileError:
            chosen = free_port(profile.connect_host)
            note = f"port {profile.port} is busy: the demo simulator runs on port {chosen}"
    profile = dataclasses.replace(profile, server={**profile.server, "port": chosen}, sim=sim)
    return DemoTarget(profile, Path(state_dir), note)


def demo_profile(state_dir: Path, port: int | None = None, time_scale: float = 1.0) -> Profile:
    return demo_target(state_dir, port, time_scale).profile
