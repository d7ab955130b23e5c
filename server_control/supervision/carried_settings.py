"""Runtime settings that must survive a restart: N, hysteresis, dwell and forced mode.

A change applied at runtime (``specconsole threshold 8``, a key in the console) is kept
in the run record (``runtime``: only values that differ from the profile's). When the
server is restarted (crash, watchdog, a restart from the console) the new record carries
them with ``runtime_pending``; the process that sees the new server ready re-applies them
(``reapply``) and says so, unless the profile says ``[restart] reapply_runtime = false``,
in which case it says that the server is back on the profile's values.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from server_control.control.guard import REAPPLY
from server_control.control.settings import Control
from server_control.model.vocabulary import ChangeState
from server_control.protocol import runtime_settings
from server_control.state import journal, runs
from server_control.supervision.run_facts import RunUpdater

if TYPE_CHECKING:
    from server_control.model.snapshot import SettingChange
    from server_control.supervision.supervised import SupervisedProfile

log = logging.getLogger(__name__)


def _profile_key(key: str) -> str:
    return runtime_settings.named(key).profile_key


def remember(runtime: dict[str, Any], key: str, value: object, profile_dynamic: dict[str, Any]) -> None:
    """Keep ``key = value`` in ``runtime`` (validated); a value equal to the profile's is dropped."""
    setting = runtime_settings.by_key(key)
    if setting is None:
        return
    value = setting.validate(value)
    if value == profile_dynamic.get(setting.profile_key):
        runtime.pop(key, None)
    else:
        runtime[key] = value


def describe(runtime: dict[str, Any], profile_dynamic: dict[str, Any]) -> str:
    """``threshold 8 (profile 5), force_mode target_only (profile auto)``."""
    return ", ".join(
        f"{s.profile_key} {runtime[s.key]} (profile {profile_dynamic.get(s.profile_key)})"
        for s in runtime_settings.SETTINGS
        if s.key in runtime
    )


def ended_with_the_run(runtime: dict[str, Any], profile_dynamic: dict[str, Any]) -> str:
    """What a stop says of the settings changed at runtime (a restart keeps them)."""
    return (
        f"runtime settings ended with the run: {describe(runtime, profile_dynamic)} "
        "(the next launch runs the profile's; `restart` keeps them)"
    )


def not_reapplied(runtime: dict[str, Any], profile_dynamic: dict[str, Any]) -> str:
    return (
        "runtime settings NOT re-applied after the restart ([restart] reapply_runtime = false): "
        f"the server runs the profile's values again instead of {describe(runtime, profile_dynamic)}"
    )


async def reapply(
    control: Control,
    runtime: dict[str, Any],
    profile_dynamic: dict[str, Any],
    on_result: Callable[[str, Any, SettingChange], None] | None = None,
    on_start: Callable[[str, Any], None] | None = None,
) -> tuple[bool, str]:
    """Set every kept value on the new server, read back on every rank. (all ok, what was
    done). ``on_start(key, value)`` before and ``on_result(key, value, change)`` after each setting."""
    failed = []
    for key in runtime_settings.keys():
        if key in runtime:
            if on_start is not None:
                on_start(key, runtime[key])
            res = await control.set_setting(key, runtime[key])
            if on_result is not None:
                on_result(key, runtime[key], res)
            if res.state != ChangeState.APPLIED:
                failed.append(f"{_profile_key(key)} {runtime[key]}: {res.state}: {res.detail}")
    what = describe(runtime, profile_dynamic)
    if failed:
        return False, f"could not re-apply runtime settings after the restart ({'; '.join(failed)})"
    return True, f"re-applied runtime settings after the restart: {what}"


class CarriedSettingsPort(RunUpdater, Protocol):
    """What the carried settings use of their supervisor (supervisor.py)."""

    profile: SupervisedProfile
    state_dir: Path
    record: runs.RunRecord | None

    @property
    def dynamic(self) -> dict[str, Any]: ...

    def journal(self, action: str, result: str, detail: str = "", **kw: Any) -> None: ...

    def load_disk(self) -> runs.RunRecord | None: ...


class CarriedSettings:
    """A part of ``Supervisor`` (server_control/supervision/supervisor.py): the run's runtime
    settings, kept in its record and re-applied to the next server."""

    def __init__(self, sup: CarriedSettingsPort) -> None:
        self.sup = sup

    def current(self) -> dict[str, Any]:
        sup = self.sup
        disk = sup.load_disk()
        rec = disk if disk is not None and (sup.record is None or disk.pid == sup.record.pid) else sup.record
        return dict(rec.runtime) if rec is not None else {}

    async def remember(self, key: str, value: object) -> str | None:
        """A runtime setting was applied to this run: keep it for the next restart. None:
        kept (or no run to keep it for); else why it is NOT kept (a full disk...)."""
        sup = self.sup
        rec = sup.record
        if rec is None:
            return None
        try:
            saved = await runs.update_record(
                sup.profile.name, sup.state_dir, rec.pid, lambda r: remember(r.runtime, key, value, sup.dynamic)
            )
        except OSError as exc:
            return (
                f"the run record {runs.record_path(sup.profile.name, sup.state_dir)} could not be written: {exc.strerror or exc}"
            )
        if saved is not None and sup.record is rec:
            sup.record = saved
        return None

    async def reapply(self) -> None:
        """Once the restarted server is ready: set what was changed at runtime before."""
        sup = self.sup
        rec = sup.record
        if rec is None or not rec.runtime_pending:
            return
        claimed: list[Any] = []

        def claim(r: runs.RunRecord) -> None:
            if r.runtime_pending:
                claimed.append(dict(r.runtime))
            r.runtime_pending = False

        saved = await runs.update_record(sup.profile.name, sup.state_dir, rec.pid, claim)
        if saved is not None and sup.record is rec:
            sup.record = saved
        if not claimed:  # another process got there first
            return
        try:
            control = Control(
                sup.profile.url, sup.profile.api_key(), sup.profile.admin_api_key(), timeout_s=sup.profile.health["timeout_s"]
            )
        except ValueError as exc:  # ProfileError: a key variable went missing
            sup.update(runtime_note=f"could not re-apply runtime settings after the restart: {exc}")
            return
        try:
            ok, note = await reapply(
                control,
                claimed[0],
                sup.dynamic,
                lambda key, value, res: sup.journal(
                    REAPPLY, res.state, res.detail, key=key, old=sup.dynamic.get(_profile_key(key)), new=value
                ),
                # journaled before the set: a poll that sees the value first knows it is the re-apply
                lambda key, value: sup.journal(
                    REAPPLY, journal.PENDING, key=key, old=sup.dynamic.get(_profile_key(key)), new=value
                ),
            )
        finally:
            await control.aclose()
        (log.info if ok else log.warning)("%s: %s", sup.profile.name, note)
        sup.update(runtime_note=note, last_error=None if ok else note)
