"""Get and set the dynamic speculation settings of a running server: the threshold, the
forced mode, the hysteresis and the minimum dwell.

``POST /set_internal_state {"server_args": {KEY: value}}`` answers one boolean per DP
rank (SGLang answers from TP rank 0 of each). A change counts as applied only when a
read-back of /server_info shows the new value in EVERY DP rank's internal state and, where
the server publishes them (``dynamic_speculation.ranks``: the patch with TP > 1, the
simulator), on EVERY TP rank; a rank that reads another value is named. Outcomes
(``SettingChange.state``; the ``last_change`` of the session snapshot):

  pending      sent, not yet confirmed
  applied      every rank reads back the new value
  refused      the value is invalid (checked here first) or the server said false
  unsupported  the server does not know the key (stock SGLang: "Updating ... is not
               supported." and no such key in internal_states)
  error        the request failed (unreachable, HTTP error, read-back never matched)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

from server_control.model.snapshot import SettingChange
from server_control.model.vocabulary import ChangeState
from server_control.net import tls
from server_control.net.http import auth_headers, bounded_request, client_limits, describe_error
from server_control.net.lean_httpx import httpx
from server_control.protocol import rank_verdict, runtime_settings
from server_control.protocol.runtime_settings import FORCE, THRESHOLD, RuntimeSetting
from server_control.sanitize import clean_json, strip_controls
from server_control.telemetry.sample import intval

UNSUPPORTED = "this server does not support runtime threshold changes"
READBACK_TIMEOUT_S = 3.0
READBACK_PERIOD_S = 0.02


def change(
    key: str | None, requested: object, state: ChangeState, detail: str, ranks: Sequence[bool] | None = None
) -> SettingChange:
    return SettingChange(requested, state, detail, tuple(ranks or ()), key)


def rank_results(body: object) -> list[bool] | None:
    """The /set_internal_state answer as one bool per rank, whatever its exact shape."""
    if isinstance(body, bool):
        return [body]
    if isinstance(body, dict):
        for key in ("updated", "success"):
            if isinstance(body.get(key), bool):
                return [body[key]]
        return None
    if isinstance(body, list) and body:
        out = []
        for item in body:
            if isinstance(item, bool):
                out.append(item)
            elif isinstance(item, dict) and isinstance(item.get("updated", item.get("success")), bool):
                out.append(bool(item.get("updated", item.get("success"))))
            else:
                return None
        return out
    return None


def _where(dp: int, tp_label: str, dp_count: int) -> str:
    """'TP1', 'DP0 TP1', 'DP1' or '' for one read-back value."""
    return " ".join(p for p in (f"DP{dp}" if dp_count > 1 else "", tp_label) if p)


def _named(key: str, value: object) -> object:
    """A named setting read back as its index (the forced mode) -> its name; anything else as it is."""
    setting = runtime_settings.by_key(key)
    return setting.shown(value) if setting is not None else value


class Control:
    """``records_fn()`` returns log records newer than a store sequence number (or None),
    so a refusal can quote the server's own reason."""

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        admin_api_key: str | None = None,
        *,
        timeout_s: float = 5.0,
        records_since: Callable[[int], list[Any]] | None = None,
        log_seq: Callable[[], int] | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.admin_api_key = admin_api_key
        self.timeout_s = timeout_s
        self.records_since = records_since
        self.log_seq = log_seq
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(trust_env=False, verify=tls.shared(), timeout=self.timeout_s, limits=client_limits())
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _headers(self) -> dict[str, Any]:
        return auth_headers(self.admin_api_key or self.api_key)

    async def internal_states(self) -> list[dict[str, Any]]:
        resp = await bounded_request(self.client(), "GET", self.url + "/server_info", headers=self._headers())
        resp.raise_for_status()
        body = clean_json(json.loads(resp.content.decode("utf-8")))  # shown later: terminal-safe now
        states = body.get("internal_states") if isinstance(body, dict) else None
        if not isinstance(states, list):
            raise ValueError("/server_info has no internal_states list")
        return [s if isinstance(s, dict) else {} for s in states]

    async def values(self, key: str) -> list[Any]:
        """``key`` as each rank reads it now: every TP rank of every DP rank where the server
        publishes them (a forced mode by its name; a malformed value named)."""
        return [_named(key, v) for s in await self.internal_states() for _label, v in rank_verdict.values_by_rank(s, key)]

    async def get(self) -> dict[str, Any]:
        """{"thresholds": [per rank], "force": [...], "settings": {word: [per rank]}, "supported":
        bool} or {"error": ...}: every DP rank's entry (a named value by its name)."""
        try:
            states = await self.internal_states()
        except (httpx.HTTPError, ValueError) as exc:
            return {"error": describe_error(exc, f"{self.url}/server_info")}
        return {
            "thresholds": [intval(s.get(THRESHOLD.key)) for s in states],
            "force": [s.get(FORCE.key) for s in states],
            "settings": {rs.word: [_named(rs.key, s.get(rs.key)) for s in states] for rs in runtime_settings.SETTINGS},
            "supported": bool(states) and all(THRESHOLD.key in s for s in states),
        }

    async def set_setting(self, key: str, value: object) -> SettingChange:
        """One runtime setting by its server-argument name: refused here with the reason when
        the value is not valid, else sent, then read back on every rank."""
        setting = runtime_settings.by_key(key)
        if setting is None:
            return change(key, value, ChangeState.REFUSED, f"{key} is not a runtime setting")
        try:
            valid = setting.validate(value)
        except ValueError as exc:
            return change(key, value, ChangeState.REFUSED, str(exc))
        return await self._set(setting, valid, value)

    async def _post(self, setting: RuntimeSetting, value: runtime_settings.Value) -> httpx.Response:
        # SGLang's HTTP layer types these values as numbers (a string gets 400/422 before any
        # scheduler sees it): a named value travels as its index (``RuntimeSetting.to_wire``).
        body = {"server_args": {setting.key: setting.to_wire(value)}}
        return await bounded_request(self.client(), "POST", self.url + "/set_internal_state", headers=self._headers(), json=body)

    async def _set(self, setting: RuntimeSetting, value: runtime_settings.Value, requested: object) -> SettingChange:
        key, seq = setting.key, self._seq()
        try:
            resp = await self._post(setting, value)
        except httpx.HTTPError as exc:
            return change(key, requested, ChangeState.ERROR, describe_error(exc, f"{self.url}/set_internal_state"))
        if resp.status_code in (401, 403):
            return change(
                key,
                requested,
                ChangeState.ERROR,
                f"/set_internal_state: HTTP {resp.status_code}: not authorised "
                "(give the admin or API key: admin_api_key_env / api_key_env in the profile)",
            )
        if resp.status_code == 404:
            return change(key, requested, ChangeState.UNSUPPORTED, f"{UNSUPPORTED} (/set_internal_state: HTTP 404)")
        try:
            resp.raise_for_status()
            ranks = rank_results(json.loads(resp.content.decode("utf-8")))
        except (httpx.HTTPError, ValueError, UnicodeDecodeError) as exc:
            return change(key, requested, ChangeState.ERROR, describe_error(exc, f"{self.url}/set_internal_state"))
        if ranks is None:
            return change(
                key, requested, ChangeState.ERROR, f"/set_internal_state: unexpected answer {strip_controls(resp.text[:200])!r}"
            )
        if not all(ranks):
            return await self._explain_false(key, requested, ranks, seq)
        return await self._read_back(key, value, requested, ranks)

    async def _read_back(self, key: str, value: object, requested: object, ranks: list[bool]) -> SettingChange:
        """Every DP rank's entry and, where the server publishes them, every TP rank within
        it must read the new value back (SGLang answers /set_internal_state from TP0 only)."""
        deadline = time.monotonic() + READBACK_TIMEOUT_S
        seen: list[Any] = []
        while True:
            try:
                states = await self.internal_states()
                if states and all(key not in s for s in states):
                    return change(key, requested, ChangeState.UNSUPPORTED, f"{UNSUPPORTED} (no {key} in internal_states)", ranks)
                seen = [
                    (_where(i, label, len(states)), _named(key, v))
                    for i, s in enumerate(states)
                    for label, v in rank_verdict.values_by_rank(s, key)
                ]
                if states and all(v == value for _, v in seen):
                    tp = len(seen) // len(states)
                    on = f"{len(states)} DP rank(s)" + (f" x {tp} TP ranks" if tp > 1 else "")
                    return change(key, requested, ChangeState.APPLIED, f"{key}={value} read back on {on}", ranks)
            except (httpx.HTTPError, ValueError) as exc:
                seen = [("", describe_error(exc, "read-back"))]
            if time.monotonic() >= deadline:
                wrong = [(w, v) for w, v in seen if v != value] or seen
                shown = "; ".join(f"{w} reads {key}={v}" if w else f"{key}={v}" for w, v in wrong)
                return change(key, requested, ChangeState.ERROR, f"server said true but {shown} (want {value})", ranks)
            await asyncio.sleep(READBACK_PERIOD_S)

    async def _explain_false(self, key: str, requested: object, ranks: list[bool], seq: int | None) -> SettingChange:
        reason = await self._log_reason(key, seq)
        if reason and "not supported" in reason:
            return change(key, requested, ChangeState.UNSUPPORTED, f"{UNSUPPORTED}: {reason}", ranks)
        try:
            states = await self.internal_states()
            if states and all(key not in s for s in states):
                detail = f"{UNSUPPORTED} (the server answered false and has no {key} in internal_states)"
                return change(key, requested, ChangeState.UNSUPPORTED, detail + (f": {reason}" if reason else ""), ranks)
        except (httpx.HTTPError, ValueError):
            pass
        detail = f"the server refused {key}={requested}"
        return change(key, requested, ChangeState.REFUSED, f"{detail}: {reason}" if reason else detail, ranks)

    def _seq(self) -> int | None:
        try:
            return self.log_seq() if self.log_seq else None
        except Exception:  # noqa: BLE001 - no log position: the reason is then looked up without one
            return None

    async def _log_reason(self, key: str, seq: int | None, wait_s: float = 1.0) -> str | None:
        """The server's own words for a refusal, from log records logged after ``seq``."""
        if self.records_since is None or seq is None:
            return None
        pattern = re.compile(rf"(refused {re.escape(key)}=.*|Updating {re.escape(key)} is not supported\.?)")
        deadline = time.monotonic() + wait_s
        while True:
            try:
                for rec in self.records_since(seq):
                    m = pattern.search(getattr(rec, "text", "") or "")
                    if m:
                        return m.group(1)
            except Exception:  # noqa: BLE001 - a log that cannot be read gives no reason, not an error
                return None
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)
