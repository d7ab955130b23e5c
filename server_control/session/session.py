"""One object per server: ties the run, logs, telemetry, control and verification together.
Its API (``SessionLike``) is described in one place: server_control/session/api.py.

Wiring only: the parts live in server_control.session.* and the packages below. Subscribers
are called on the event loop with a topic: "snapshot" (a poll, an NVML sample, a run-state or
setting change) or "logs" (new records in ``session.store``); ``snapshot()`` is a ``SessionSnapshot``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server_control.advice.source import SourceError, advice_from, poll_reading
from server_control.advice.store import CurvesHome
from server_control.advice.words import Advice
from server_control.control.guard import REAPPLY, SettingGuard
from server_control.control.init_lines import InitExplanation
from server_control.control.settings import Control
from server_control.control.verify import SwitchWatch
from server_control.logs import LogPipeline, LogStore
from server_control.logs.access import is_polling
from server_control.model.load import Load
from server_control.model.operation import OperationResult
from server_control.model.snapshot import LogStatus, SessionSnapshot, SettingChange
from server_control.model.switch_rate import SwitchRate
from server_control.model.verification import Verification
from server_control.model.vocabulary import Outcome
from server_control.protocol import runtime_settings
from server_control.session.history_keeper import HistoryKeeper
from server_control.session.log_facts import LogFacts
from server_control.session.run_backends import AttachedRun, ProfileRun, RunLike, RunSupervisorPort
from server_control.session.run_notes import RunNotes, not_ours
from server_control.session.setting_changes import SettingChanges
from server_control.session.snapshot_parts import SnapshotParts, rate_of, server_status, stale_elsewhere
from server_control.session.subscribers import Subscribers
from server_control.session.verdict import explanation_of, verification_of
from server_control.state.history import Recorded
from server_control.telemetry.http_poll import DEFAULT_INTERVAL_S, HttpPoller
from server_control.telemetry.nvml import NvmlSampler, gpu_reader_for
from server_control.telemetry.sample import Sample
from server_control.telemetry.series import ModeTimeline, PanelSeries

if TYPE_CHECKING:
    from server_control.config.profile import Profile


log = logging.getLogger(__name__)


class Session:
    def __init__(
        self,
        url: str,
        run: RunLike,
        *,
        profile: Profile | None = None,
        api_key: str | None = None,
        admin_api_key: str | None = None,
        poll_interval_s: float = DEFAULT_INTERVAL_S,
        nvml: Any = None,
        store: LogStore | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.profile = profile
        self.run = run
        self.attached = profile is None
        self.poll_interval_s = poll_interval_s
        self.store = store if store is not None else LogStore()
        self.panels = PanelSeries()
        self.timeline = ModeTimeline()
        self.parts = SnapshotParts(self.panels, self.timeline)
        self.runtime = SwitchWatch()
        self.poller = HttpPoller(
            self.url, api_key, interval_s=poll_interval_s, records_fn=self.store.decode_tail, on_sample=self._on_sample
        )
        self.nvml = NvmlSampler(self.run.pids, nvml=nvml or gpu_reader_for(profile, url, api_key), on_update=self._on_nvml_thread)
        self.control = Control(
            self.url, api_key, admin_api_key, records_since=self.store.since, log_seq=lambda: self.store.last_seq
        )
        self.last_change: SettingChange | None = None
        self._elsewhere_at = 0.0  # monotonic time of the last "changed elsewhere" (shown ELSEWHERE_SHOWN_S)
        state_dir = getattr(getattr(run, "sup", None), "state_dir", None)
        self.guard = SettingGuard(self.control, self.url, state_dir, profile.name if profile is not None else None)
        self.settings = SettingChanges(
            self.control,
            self.guard,
            refusal=self._refusal,
            current=lambda: self.last,
            remember=run.remember_runtime,
            on_change=self._on_setting_change,
            poke=self.poller.poke,
        )
        self.last: Sample | None = None
        self.last_good: Sample | None = None  # the last poll the server answered (stale data, greyed)
        self.foreign: str | None = None  # why what answers is not this run's server (steering off)
        self._started_at = time.time()
        self.notes = RunNotes()
        self._subs = Subscribers()  # silent: the console's screen has no place for a traceback
        self._history = HistoryKeeper.of(run, profile, self.mark)
        self._tasks: list[asyncio.Task[Any]] = []
        self._pipeline: LogPipeline | None = None
        self._log_path: Path | None = None
        self.facts = LogFacts()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = False

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def for_profile(
        cls,
        profile: Profile,
        state_dir: str | Path | None = None,
        *,
        supervise: bool = True,
        supervisors: RunSupervisorPort | None = None,
        **kw: Any,
    ) -> Session:
        run = ProfileRun(profile, state_dir, supervise, supervisors)  # supervisors: see ProfileRun
        return cls(profile.url, run, profile=profile, api_key=profile.api_key(), admin_api_key=profile.admin_api_key(), **kw)

    @classmethod
    def attach(cls, url: str, log_path: str | Path | None = None, *, curves_home: CurvesHome | None = None, **kw: Any) -> Session:
        """A server someone else runs (``kw``: the keys and the rest, as ``Session``'s)."""
        return cls(url, AttachedRun(log_path, curves_home), **kw)

    # -- life cycle -----------------------------------------------------------------------
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self._loop = asyncio.get_running_loop()
        self._started_at = time.time()
        await self.run.start(self._on_run_change)
        self._follow(self.run.log_path())
        self._tasks.append(asyncio.create_task(self.poller.run(), name="http-poll"))
        self.nvml.start()

    async def close(self, stop_server: bool = False) -> None:
        if stop_server:
            await self.stop()
        self.poller.stop()
        self._history.close()
        if self._pipeline is not None:
            self._pipeline.stop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass
        self._tasks.clear()
        await asyncio.to_thread(self.nvml.stop)
        await self.control.aclose()
        await self.run.close()
        self._started = False

    async def launch(self) -> OperationResult:
        return self._after_run_op(await self.run.launch())

    async def stop(self) -> OperationResult:
        return self._after_run_op(await self.run.stop(), ended=True)

    async def restart(self) -> OperationResult:
        return self._after_run_op(await self.run.restart())

    def _after_run_op(self, result: OperationResult, ended: bool = False) -> OperationResult:
        if ended and result.done:  # its runtime changes ended with the run (the stop's message says so)
            self.last_change = None
        self._on_run_change()
        return result

    # -- subscribers ----------------------------------------------------------------------
    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """``callback(topic)`` on the event loop; returns a function that unsubscribes."""
        return self._subs.subscribe(callback)

    def _publish(self, topic: str) -> None:
        self._subs.publish(topic)

    def _on_nvml_thread(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._publish, "snapshot")
            except RuntimeError:  # loop closing
                pass

    # -- logs -----------------------------------------------------------------------------
    def _follow(self, path: str | Path | None) -> None:
        """Follow ``path`` (a new run's log); a different path restarts the follower."""
        path = Path(path) if path else None
        if path == self._log_path:
            return
        if self._pipeline is not None:
            self._pipeline.stop()
            self.timeline.reset()
            self.facts.reset()
            self.settings.damping_at = None
            self.runtime = SwitchWatch()
        self._log_path = path
        self._pipeline = None
        if path is None:
            return
        if self.store.total:  # a divider between runs (before: the new log just went on)
            self.mark(f"a new run's log begins: {path}")
        self._pipeline = LogPipeline(path, self.store, on_records=self._on_records)
        self._tasks.append(asyncio.create_task(self._pipeline.run(), name="log-follow"))

    def log_caught_up(self, size_at: int | None = None) -> bool:
        """True when the follower has read the log up to ``size_at`` (default: its size now),
        or there is no log to read."""
        return self._pipeline is None or self._pipeline.caught_up(size_at)

    def _on_records(self, last_seq: int) -> None:
        try:
            self._scan_records(last_seq)
        except Exception:  # noqa: BLE001 - never stop the log pipeline over our bookkeeping
            log.exception("scanning new log records failed")
        self._publish("logs")

    def _scan_records(self, last_seq: int) -> None:
        records = self.store.since(self.facts.seen_seq)
        self.facts.scan(records, last_seq, time.time(), self.timeline, self.settings.damped)
        if any(r.kind != "console" and not is_polling(r) for r in records):
            self.poller.wake()  # work, a switch, a setting changed: a quiet poller polls now

    # -- telemetry ------------------------------------------------------------------------
    def mark(self, what: str) -> None:
        """A line of the console's own in the log view (kind "console"; never in a file)."""
        self.store.add_console_line(f"\u2500\u2500 specconsole {time.strftime('%H:%M:%S')}: {what} \u2500\u2500")
        self._publish("logs")

    def _ours(self, sample: Sample) -> Sample:
        """``sample`` as this session may use it: a server that answers but is not this
        run's (server_control/listener.py) counts as not answering, with who holds the port;
        nothing it says reaches the panels, the timeline or the verification."""
        if not sample.reachable:
            self.foreign = None  # nobody answers now: said as any outage
            return sample
        if self.run.owns_server() is not False:
            if self.foreign is not None:
                self.foreign = None
                self.mark("this run's server answers")
            return sample
        if self.foreign is None:
            self.foreign = not_ours(self.profile.port if self.profile is not None else None)
            self.mark(self.foreign)
        return Sample(ts=sample.ts, reachable=False, error=self.foreign, poll_s=sample.poll_s)

    def _on_sample(self, sample: Sample) -> None:
        sample = self._ours(sample)
        was = self.last.reachable if self.last else None
        if self.foreign is not None:
            pass  # said once by _ours
        elif was and not sample.reachable:
            self.mark(f"the server stopped answering ({sample.error})")
        elif was is False and sample.reachable and self.last_good is not None:
            self.mark("the server answers again")
        self.last = sample
        if sample.reachable:
            self.last_good = sample
        for key, old, new, who in self.guard.elsewhere(sample):  # a change this session did not make
            self.last_change = self.guard.seen(key, old, new, who)  # re-applied, auto-tuned or elsewhere
            if who != REAPPLY:
                self._elsewhere_at = time.monotonic()
            self.settings.seen_elsewhere(key, sample.ts)
        self.panels.add_sample(sample)
        self.timeline.add_sample(sample)
        self.runtime.observe(sample)
        self._history.observe(sample, self.run.status(), self.foreign is not None)
        self.run.on_sample(sample)
        self._follow(self.run.log_path())
        self._publish("snapshot")

    def _on_run_change(self) -> None:
        if self._started:
            st = self.run.status()
            for line in self.notes.exits(st):
                self.mark(line)
            self._follow(self.run.log_path())
            for line in self.notes.news(st):  # said after the new log is followed
                self.mark(line)
        self._publish("snapshot")

    # -- control --------------------------------------------------------------------------
    async def set_threshold(self, n: object) -> OperationResult:
        return await self.set_setting(runtime_settings.THRESHOLD.key, n)

    async def set_force(self, mode: object) -> OperationResult:
        return await self.set_setting(runtime_settings.FORCE.key, mode)

    async def set_setting(self, key: str, value: object) -> OperationResult:
        """Any runtime setting by its server-argument name (protocol/runtime_settings.py),
        validated and read back on every rank; the operation is named by the setting's word."""
        setting = runtime_settings.by_key(key)
        return OperationResult.of_change(setting.word if setting else key, await self.settings.set(key, value))

    def _refusal(self) -> str | None:
        """Why a change is refused now: what answers is not this run's server (or None)."""
        if self.foreign is None and self.last is not None and self.last.reachable:
            self._ours(self.last)  # the port may have changed hands since the last poll
        return self.foreign

    def _on_setting_change(self, change: SettingChange) -> None:
        self.last_change = change
        self._publish("snapshot")

    def switch_rate(self) -> SwitchRate:
        """Rule-made switches per minute lately, from their own times: flapping and what to do
        (telemetry/flapping.py). Measured from the earliest time known (the run's start, its
        log's first line, this session's start) and from the last change of N / hysteresis /
        dwell, so that every observer of the run says the same."""
        up = self.run.status().uptime_s
        return rate_of(self.last_good, self.timeline, (self._started_at, self.facts.began), up, self.settings.damping_at)

    # -- what the headless commands and the fleet ask beyond the screen ----------------------
    @property
    def polls(self) -> int:
        """HTTP polls finished so far."""
        return self.poller.polls

    def poke(self) -> None:
        """Poll now (not at the next interval)."""
        self.poller.poke()

    async def read_settings(self) -> dict[str, Any]:
        """The runtime settings of every rank as the server shows them now (``Control.get``)."""
        return await self.control.get()

    def prepare_control(self) -> None:
        """Make the setting client now (its TLS context costs ~35 ms), not at the first change."""
        self.control.client()

    # -- verification and advice -----------------------------------------------------------
    def verification(self) -> Verification:
        runtime = self.runtime.status(self.timeline.current())
        return verification_of(self.last, self.profile, self.facts, log_attached=self._log_path is not None, runtime=runtime)

    def init_explanation(self) -> InitExplanation:
        return explanation_of(self.last, self.profile, self.facts, log_attached=self._log_path is not None)

    async def advice(self) -> Advice:
        """The advisor's answer from the last poll's cost curves, kept in the state dir if supervised."""
        if self.foreign is not None:
            raise SourceError("not this run's server: no advice from it")
        s, err = self.last, self.last.error if self.last else None
        poll = (self.url, bool(s and s.reachable), err, s.model if s else None, s.ranks[0].dynamic if s and s.ranks else None)
        return await asyncio.to_thread(advice_from, lambda: poll_reading(*poll), self.url, self.run.curves_home(self.url))

    async def verify(self) -> OperationResult:
        result = self.verification()
        return OperationResult("verify", Outcome.DONE, f"verification: {result.summary}", verification=result)

    # -- the snapshot ---------------------------------------------------------------------
    def history(self) -> Recorded:
        return self._history.recorded()

    def snapshot(self) -> SessionSnapshot:
        """While the server does not answer, spec and live are the last answered poll's (its
        time in ``live.ts``), for the screen to grey with their age."""
        s = self.last
        g = s if s and s.reachable else self.last_good
        load = g.load if g else None
        if stale_elsewhere(self.last_change, g, self._elsewhere_at):
            self.last_change = None  # old news, or no longer what the server shows
        return SessionSnapshot(
            url=self.url,
            profile=self.profile.name if self.profile is not None else None,
            attached=self.attached,
            run=self.run.status(),
            server=server_status(s, self.foreign is not None),
            spec=self.parts.spec(g, self.switch_rate()),
            last_change=self.last_change,
            live=replace(load, source=None, ts=g.ts) if g and load else Load(),  # source: not in the JSON
            series=self.parts.series(),
            timeline=self.parts.timeline_of(s),
            gpus=self.nvml.snapshot(),
            verify=self.verification(),
            logs=LogStatus(**self.store.counters(), path=str(self._log_path) if self._log_path else None),
        )
