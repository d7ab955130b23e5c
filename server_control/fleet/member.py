"""One fleet member: its session (local profile, remote over SSH, or attached URL), the row
the fleet screen shows, and actions that end in a per-member result.

    member = Member.build(spec, fleet_spec, state_dir)
    await member.start(); member.row() -> MemberRow; await member.act("threshold", 8) -> MemberResult

Outcomes of an action (``MemberResult.outcome``), worst first:
  no-answer   the member did not answer (unreachable, SSH failed, timed out)
  refused     it answered no (invalid value, not supported, not ours to launch/stop)
  failed      it tried and failed (verification failed, the server died at launch, ...)
  pending     not decided yet (verification still waiting for evidence)
  ok          done
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server_control.advice.store import CurvesHome
from server_control.fleet.spec import LOCAL, URL, FleetSpec, MemberSpec
from server_control.model.gpu_status import GpuStatus
from server_control.model.latency import LatencyStatus
from server_control.model.operation import OperationResult
from server_control.model.snapshot import SettingChange
from server_control.model.verification import Verification
from server_control.model.vocabulary import LIVE_STATES, STOPPED_STATES, ChangeState, MemberOutcome, OtherState, RunState, Verdict
from server_control.state.state_dir import resolve_state_dir

ROW_MAX_AGE_S = 5.0  # a row whose session published nothing is rebuilt after this long

if TYPE_CHECKING:
    from server_control.config.profile import Profile
    from server_control.fleet.remote import RemoteRun
    from server_control.session.run_backends import RunSupervisorPort
    from server_control.session.session import Session

# a local member's own detached supervisors (the console's: console/run_supervisor.py), or
# None where a detached supervisor cannot run its profile (then this process supervises it)
SupervisorsFor = Callable[["Profile", "str | Path | None"], "RunSupervisorPort | None"]


ACTIONS = ("threshold", "force", "verify", "launch", "stop", "restart", "status")
_NO_ANSWER_WORDS = ("timed out", "connection refused", "unreachable", "no answer", "ssh failed")
MARK = {Verdict.PASS: "+", Verdict.FAIL: "x", Verdict.PENDING: "."}


LATENCY_WINDOW_S = 15.0


@dataclass(frozen=True)
class MemberRow:
    """What the fleet table shows for one member (None: not known yet)."""

    name: str
    kind: str
    host: str
    state: str
    reachable: bool
    mode: str | None = None
    threshold: int | None = None
    force: str | None = None
    batch: int | None = None
    tok_s: float | None = None
    accept_len: float | None = None
    verify: str = "pending"
    marks: str = "..."  # one character per layer: + pass, x fail, . pending
    restarts: int = 0
    gpu_util: float | None = None
    itl_p95: float | None = None  # seconds, over the last 15 s (server.latency; None: no histograms)
    ttft_p95: float | None = None
    error: str | None = None
    url: str = ""
    last_change: str | None = None  # the state of the last threshold/force change

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class MemberResult:
    member: str
    action: str
    outcome: MemberOutcome
    detail: str
    data: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def stands_out(self) -> bool:
        return self.outcome in (MemberOutcome.REFUSED, MemberOutcome.NO_ANSWER, MemberOutcome.FAILED)

    def to_json(self) -> dict[str, Any]:
        return {"member": self.member, "action": self.action, "outcome": self.outcome, "detail": self.detail, "data": self.data}


def exit_code(results: Iterable[MemberResult]) -> int:
    """0 all ok, 1 any refusal / no answer / failure, 3 any pending (and no failure)."""
    outcomes = {r.outcome for r in results}
    if outcomes & {MemberOutcome.FAILED, MemberOutcome.REFUSED, MemberOutcome.NO_ANSWER}:
        return 1
    return 3 if MemberOutcome.PENDING in outcomes else 0


def _no_answer(detail: str) -> bool:
    low = detail.lower()
    return any(w in low for w in _NO_ANSWER_WORDS)


def change_outcome(change: SettingChange | None) -> MemberOutcome:
    state = change.state if change is not None else None
    if state == ChangeState.APPLIED:
        return MemberOutcome.OK
    if state == ChangeState.PENDING:
        return MemberOutcome.PENDING
    if state in (ChangeState.REFUSED, ChangeState.UNSUPPORTED):
        return MemberOutcome.REFUSED
    return MemberOutcome.NO_ANSWER if _no_answer(change.detail if change is not None else "") else MemberOutcome.FAILED


def run_outcome(result: OperationResult) -> MemberOutcome:
    """A launch/stop/restart result as a member outcome (a host that never answered stands out)."""
    return MemberOutcome.OK if result.done else MemberOutcome.NO_ANSWER if result.no_answer else MemberOutcome.FAILED


def curves_home(fleet: FleetSpec, spec: MemberSpec, state_dir: str | Path | None = None) -> CurvesHome | None:
    """Where the fleet keeps a member's cost curves: a local member's supervised run keeps
    its own (the run's state dir, by its URL); a remote or URL member's are the fleet's,
    under the member's name and where it is (a remote member's URL is a tunnel's port,
    new every run), so the next fleet console advises from them too."""
    if spec.kind == LOCAL:
        return None
    return CurvesHome(resolve_state_dir(state_dir) / "fleet" / fleet.name / "curves", f"{fleet.name}/{spec.name}@{spec.where}")


def _p95(latency: LatencyStatus, metric: str) -> float | None:
    """The member's p95 of ``metric`` over the last 15 s (the screen's window)."""
    w = latency.window(LATENCY_WINDOW_S) if latency.available else None
    return w.get(metric).p95 if w is not None else None


def _gpu_util(gpus: GpuStatus) -> float | None:
    utils = [d.util for d in gpus.devices if d.util is not None]
    return round(sum(utils) / len(utils), 1) if utils else None


class Member:
    def __init__(self, spec: MemberSpec, session: Session, remote: RemoteRun | None = None) -> None:
        self.spec = spec
        self.session = session
        self.remote = remote  # RemoteRun for ssh members
        self._row: MemberRow | None = None  # the last row built, and when (monotonic)
        self._row_at = 0.0
        self._changed = True  # the session published a change since that row
        session.subscribe(self._on_session_event)

    def _on_session_event(self, topic: str) -> None:
        if topic != "logs":  # log lines are not in the row
            self._changed = True

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def url(self) -> str:
        return self.session.url

    @property
    def worker_url(self) -> str:
        """The URL the gateway sends this member's traffic to."""
        return self.spec.worker_url or self.session.url

    @classmethod
    def build(
        cls,
        spec: MemberSpec,
        fleet: FleetSpec,
        state_dir: str | Path | None = None,
        *,
        supervise: bool = True,
        supervisors: SupervisorsFor | None = None,
    ) -> Member:
        from server_control.session.session import Session  # noqa: PLC0415 - heavy

        poll = fleet.poll_interval_s
        if spec.kind == LOCAL and spec.profile is not None:
            own = supervisors(spec.profile, state_dir) if supervisors is not None else None
            session = Session.for_profile(spec.profile, state_dir, supervise=supervise, supervisors=own, poll_interval_s=poll)
            return cls(spec, session)
        key = os.environ.get(spec.api_key_env) if spec.api_key_env else None
        admin = os.environ.get(spec.admin_api_key_env) if spec.admin_api_key_env else None
        home = curves_home(fleet, spec, state_dir) if supervise else None
        if spec.kind == URL:
            session = Session.attach(spec.url, spec.log, curves_home=home, api_key=key, admin_api_key=admin, poll_interval_s=poll)
            return cls(spec, session)
        from server_control.fleet.remote import RemoteRun  # noqa: PLC0415
        from server_control.host.ports import free_port  # noqa: PLC0415

        port = free_port()
        mirrors = resolve_state_dir(state_dir) / "fleet" / fleet.name / spec.name
        remote = RemoteRun(spec, port, mirrors, status_interval_s=fleet.status_interval_s, curves_home=home)
        session = Session(f"http://127.0.0.1:{port}", remote, api_key=key, admin_api_key=admin, poll_interval_s=poll)
        return cls(spec, session, remote)

    async def start(self) -> None:
        await self.session.start()
        # an HTTP client costs ~35 ms to make (its TLS context): make the control client now,
        # so that the first fleet-wide change does not pay it once per member
        self.session.prepare_control()

    async def close(self) -> None:
        await self.session.close()

    # -- the row ------------------------------------------------------------------------------
    def row(self) -> MemberRow:
        """The member's row, from a snapshot built only when its session published a change
        since the last row (a poll, a run change), or ROW_MAX_AGE_S after it (ages, an
        "elsewhere" expiring); an SSH member's row is built each time (its GPUs and errors
        come from the remote's own status reads)."""
        now = time.monotonic()
        if self._row is not None and not self._changed and self.remote is None and now - self._row_at < ROW_MAX_AGE_S:
            return self._row
        self._changed = False
        self._row, self._row_at = self._build_row(), now
        return self._row

    def _build_row(self) -> MemberRow:
        snap = self.session.snapshot()
        run, spec, live, ver = snap.run, snap.spec, snap.live, snap.verify
        gpus = self.remote.gpus() if self.remote is not None else snap.gpus
        state: str = run.state or OtherState.UNKNOWN
        error = run.last_error or (None if snap.server.reachable else snap.server.error)
        if self.remote is not None and self.remote.error:
            state, error = MemberOutcome.NO_ANSWER, self.remote.error
        return MemberRow(
            name=self.name,
            kind=self.spec.kind,
            host=self.spec.where,
            state=state,
            reachable=snap.server.reachable,
            mode=spec.mode,
            threshold=spec.threshold,
            force=spec.force,
            batch=live.batch,
            tok_s=live.gen_throughput,
            accept_len=live.accept_len,
            verify=ver.summary,
            marks="".join(MARK.get(x.status, "?") for x in ver.layers),
            restarts=run.restarts,
            gpu_util=_gpu_util(gpus),
            itl_p95=_p95(snap.server.latency, "itl"),
            ttft_p95=_p95(snap.server.latency, "ttft"),
            error=error,
            url=self.url,
            last_change=snap.last_change.state if snap.last_change else None,
        )

    # -- actions ------------------------------------------------------------------------------
    async def settle(self, timeout_s: float = 5.0) -> None:
        """Wait for a poll and for the log read up to where it is now (headless commands)."""
        s = self.session
        deadline = time.monotonic() + timeout_s
        path = s.snapshot().logs.path
        size = os.path.getsize(path) if path and os.path.exists(path) else None
        polls = s.poller.polls
        while time.monotonic() < deadline:
            if s.poller.polls > polls and s.log_caught_up(size):
                break
            await asyncio.sleep(0.02)

    async def act(self, action: str, value: object = None, *, wait_s: float | None = None) -> MemberResult:
        try:
            result: MemberResult = await getattr(self, f"_{action}")(value, wait_s)
            return result
        except AttributeError:
            raise ValueError(f"unknown action {action!r} (known: {', '.join(ACTIONS)})") from None
        except Exception as exc:  # noqa: BLE001 - one member's trouble is its own result
            return MemberResult(self.name, action, MemberOutcome.FAILED, f"{type(exc).__name__}: {exc}")

    async def _threshold(self, value: object, wait_s: float | None) -> MemberResult:
        result = await self.session.set_threshold(value)
        return MemberResult(
            self.name,
            "threshold",
            change_outcome(result.change),
            result.change.detail if result.change else result.message,
            result.to_json(),
        )

    async def _force(self, value: object, wait_s: float | None) -> MemberResult:
        result = await self.session.set_force(value)
        return MemberResult(
            self.name,
            "force",
            change_outcome(result.change),
            result.change.detail if result.change else result.message,
            result.to_json(),
        )

    async def _verify(self, value: object, wait_s: float | None) -> MemberResult:
        deadline = time.monotonic() + (wait_s or 0.0)
        result = (await self.session.verify()).verification or Verification()
        while result.summary == Verdict.PENDING and time.monotonic() < deadline:
            await asyncio.sleep(0.25)
            result = (await self.session.verify()).verification or Verification()
        outcome = {Verdict.PASS: MemberOutcome.OK, Verdict.FAIL: MemberOutcome.FAILED}.get(result.summary, MemberOutcome.PENDING)
        if outcome != MemberOutcome.OK and not self.session.snapshot().server.reachable:
            outcome = MemberOutcome.NO_ANSWER if outcome == MemberOutcome.PENDING else outcome
        worst = next((x for x in result.layers if x.status == result.summary), result.layers[0])
        return MemberResult(self.name, "verify", outcome, f"{worst.name}: {worst.evidence}", result.to_json())

    async def _status(self, value: object, wait_s: float | None) -> MemberResult:
        row = self.row()
        if row.reachable or (row.state == RunState.STOPPED and not self.session.snapshot().server.foreign):
            outcome = MemberOutcome.OK  # stopped on purpose (or never launched): a state, not a failure
        else:
            outcome = MemberOutcome.NO_ANSWER if row.state not in STOPPED_STATES else MemberOutcome.FAILED
        return MemberResult(self.name, "status", outcome, row.error or row.state, row.to_json())

    def _live(self) -> bool:
        return self.session.snapshot().run.state in LIVE_STATES

    async def _launch(self, value: object, wait_s: float | None) -> MemberResult:
        if self.spec.kind == URL:
            return MemberResult(self.name, "launch", MemberOutcome.REFUSED, "attached by URL: launch it where it runs")
        if self.spec.kind == LOCAL and self._live():
            return MemberResult(self.name, "launch", MemberOutcome.OK, "already running", self.session.snapshot().run.to_json())
        result = await self.session.launch()
        if not result.done:
            return MemberResult(self.name, "launch", run_outcome(result), result.message, result.to_json())
        if wait_s:
            if not await self._wait_reachable(wait_s):
                return MemberResult(
                    self.name,
                    "launch",
                    MemberOutcome.FAILED,
                    f"not ready within {wait_s:g} s: {self.row().error or self.row().state}",
                    result.to_json(),
                )
        return MemberResult(self.name, "launch", MemberOutcome.OK, result.message or "launched", result.to_json())

    async def _wait_reachable(self, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.row().reachable and self.row().state not in STOPPED_STATES:
                return True
            self.session.poke()
            await asyncio.sleep(0.1)
        return False

    async def _stop(self, value: object, wait_s: float | None) -> MemberResult:
        if self.spec.kind == URL:
            return MemberResult(self.name, "stop", MemberOutcome.REFUSED, "attached by URL: stop it where it runs")
        result = await self.session.stop()
        return MemberResult(self.name, "stop", run_outcome(result), result.message or "stopped", result.to_json())

    async def _restart(self, value: object, wait_s: float | None) -> MemberResult:
        if self.spec.kind == URL:
            return MemberResult(self.name, "restart", MemberOutcome.REFUSED, "attached by URL: restart it where it runs")
        result = await self.session.restart()
        return MemberResult(self.name, "restart", run_outcome(result), result.message or "restarted", result.to_json())
