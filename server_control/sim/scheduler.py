"""The batch scheduler of the main process: admits requests, runs decode steps paced by
the throughput model on a (time-scaled) simulated clock, and hands out tokens.

It runs in one thread. With no work it blocks on a condition variable (no CPU).
All TP ranks take part in every step (see rank_processes.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import concurrent.futures
import dataclasses
import itertools
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from server_control.protocol import cost_curves, decision, explore, runtime_settings
from server_control.protocol.tuner import TuneSettings
from server_control.sim import args as simargs
from server_control.sim import logfmt, model
from server_control.sim.autotune import AutoTune
from server_control.sim.requests import Request, SimClock
from server_control.sim.stats import Stats, StepTiming
from server_control.sim.step_output import produce
from server_control.sim.traffic import current_phase, target_concurrency

if TYPE_CHECKING:
    from server_control.sim.logfmt import Logger
    from server_control.sim.rank_objects import LightRankGroup
    from server_control.sim.rank_processes import RankGroup

STOP_WAIT_S = 1.5  # a rank gone: how long to wait for the server's own stop before it is a failure


class Scheduler:
    def __init__(
        self,
        args: argparse.Namespace,
        ranks: RankGroup | LightRankGroup,
        log: Logger,
        deliver: Callable[[list[asyncio.Event]], None],
        on_fatal: Callable[[int, str], None],
    ) -> None:
        self.args = args
        self.ranks = ranks
        self.log = log
        self.deliver = deliver  # deliver(list_of_waiters) from this thread
        self.on_fatal = on_fatal  # on_fatal(exit_code, message) from this thread
        self.clock = SimClock(args.sim_time_scale)
        self.spec = bool(args.speculative_algorithm)
        self.num_steps = args.speculative_num_steps or 0
        self.off_reason = simargs.off_reason(args)  # the switch is off on every rank: why
        self.switch = (
            decision.SpecSwitch(**{s.field: getattr(args, s.key) for s in runtime_settings.SETTINGS})
            if self.spec and self.off_reason is None
            else None
        )
        self.rng = random.Random(args.sim_seed)
        self.accept_p = self._base_accept_p = model.accept_probability()
        self.phase_index: int | None = None  # phased traffic: the phase now running
        self.cal = dataclasses.replace(
            model.DEFAULT, kv_ms_per_ktoken=args.sim_kv_cost, cold_recovery_steps=args.sim_cold_recovery
        )
        # per-mode, per-batch-bucket cost counters, as the patch keeps them (step clock)
        # exact buckets up to the tuner's top bound when it tunes (modes compared at one batch)
        cap = cost_curves.tuned_cap(args.sim_auto_tune[1]) if args.sim_auto_tune is not None else cost_curves.DEFAULT_CAP
        self.curves = cost_curves.CostCounters(cap) if self.switch is not None else None
        self.explorer = explore.Explorer(simargs.explore_share(args))
        self.autotune = (
            AutoTune(self, TuneSettings(*args.sim_auto_tune))
            if args.sim_auto_tune is not None and self.switch is not None
            else None
        )
        self.cond = threading.Condition()
        self.waiting: collections.deque[Request] = collections.deque()
        self.running: list[Request] = []
        self.settings: collections.deque[Any] = collections.deque()
        self.stats = Stats()
        # (kind, seconds, how many) of each request's latencies: ttft, itl, e2e, queue (sim/metrics.py)
        self.latency_sink: Callable[[str, float, int], None] | None = None
        self.timing = StepTiming()
        self.spec_steps_total = 0
        self.spec_tokens_total = 0
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-scheduler", daemon=True)
        self._ready_at = 0.0
        self._vnow = 0.0
        self._idle_since: float | None = None  # simulated time the scheduler last went idle
        self.ready_activity = (0.0, 0.0)  # activity() when serving started
        self._resync = False
        self.ready = False
        self.interval = {"t": 0.0, "tokens": 0, "spec_steps": 0, "spec_tokens": 0}

    # ---- called from other threads -------------------------------------------------
    def start(self) -> None:
        self.interval["t"] = self.clock.now()
        self._thread.start()
        if self.autotune is not None:
            self.autotune.start()

    def mark_ready(self) -> None:
        """Serving starts: built-in traffic and fault timers count from here."""
        with self.cond:
            self._ready_at = self.clock.now()
            self.ready_activity = self.activity()  # the GPUs' first reading counts from here
            self.ready = True
            self._resync = True  # serving starts on a fresh step clock
            self.cond.notify()

    def activity(self) -> tuple[float, float]:
        """Simulated seconds spent in steps and with nothing to run, so far (under ``cond``).
        Their sum leaves out the time the loop fell behind the clock with work waiting (a
        starved machine): a GPU stepping back to back is busy however slow its host."""
        idle = self.stats.idle_seconds
        if self._idle_since is not None:
            idle += max(0.0, self.clock.now() - self._idle_since)
        return self.stats.busy_seconds, idle

    def serving_seconds(self) -> float:
        return self.clock.now() - self._ready_at if self.ready else 0.0

    def new_request(self, prompt_tokens: int, max_new_tokens: int, internal: bool = False) -> Request:
        return Request(
            f"{next(self._ids):08x}", max(1, prompt_tokens), max(1, max_new_tokens), internal=internal, created=self.clock.now()
        )

    def submit(self, *reqs: Request) -> None:
        """Queue requests as one unit: the scheduler wakes once, with all of them waiting,
        so they are admitted in one prefill step (as SGLang's scheduler admits a batched
        request) whatever the thread timing."""
        with self.cond:
            self.waiting.extend(reqs)
            self.cond.notify()

    def cancel(self, req: Request) -> None:
        with self.cond:
            req.finished = True
            if req in self.waiting:
                self.waiting.remove(req)

    def apply_setting(self, key: str, value: object, origin: str = "operator") -> concurrent.futures.Future[Any]:
        fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self.cond:
            self.settings.append((key, value, fut, origin))
            self.cond.notify()
        return fut

    def stop(self) -> None:
        self._stop.set()
        if self.autotune is not None:
            self.autotune.stop()
        with self.cond:
            self.cond.notify()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5.0)

    def snapshot_switch(self) -> dict[str, Any] | None:
        """The patch's ``dynamic_speculation`` entry (live_state.py)."""
        from server_control.sim.live_state import switch_snapshot

        return switch_snapshot(self)

    @property
    def vnow(self) -> float:
        """Simulated seconds at the last step (the tuner's clock)."""
        return self._vnow

    @property
    def avg_spec_accept_length(self) -> float:
        return self.spec_tokens_total / self.spec_steps_total if self.spec_steps_total else 0.0

    # ---- the scheduler thread ------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - a rank died or disagreed: the server is broken
            # A clean stop signals the whole group: a rank may die of it before the main
            # process has handled its own SIGTERM. Not a failure then (it would put a clean
            # stop into every errors-only view): wait for that stop before calling it fatal.
            if self._stop.wait(STOP_WAIT_S):
                self.log.info(f"Scheduler stopped: the server is shutting down ({exc})")
                return
            self.on_fatal(1, f"Scheduler failed: {exc}")

    def request_stop(self) -> None:
        """The server is shutting down (SIGTERM/SIGINT): the ranks may go first; no join."""
        self._stop.set()
        with self.cond:
            self.cond.notify()

    def _fault_due(self) -> bool:
        at = self.args.sim_crash_after
        return self.ready and at is not None and self.serving_seconds() >= at

    def _idle_timeout(self) -> float | None:
        if not self.ready:
            return None  # mark_ready() notifies
        waits = []
        if self.args.sim_crash_after is not None:
            waits.append(self.clock.wall_delay(self._ready_at + self.args.sim_crash_after))
        if self.args.sim_traffic.kind != "idle":
            waits.append(1.0 / self.clock.scale)
        return min(waits) if waits else None

    def _loop(self) -> None:
        step_no = 0
        last_end: float | None = None  # pacing: simulated time the last step ended
        last_vend: float | None = None  # step clock: simulated time the last step ended
        last_wall: float | None = None
        while not self._stop.is_set():
            with self.cond:
                self._apply_settings()
                if self._fault_due():
                    break
                self._top_up_traffic()
                if self._resync:
                    self._resync = False
                    last_end = last_wall = last_vend = None
                new = self._admit()
                if not self.running:
                    self._set_idle()
                    last_end = last_wall = last_vend = None
                    self.cond.wait(self._idle_timeout())
                    continue
                if self._idle_since is not None:
                    self.stats.idle_seconds += max(0.0, self.clock.now() - self._idle_since)
                    self._idle_since = None
            decoding = [r for r in self.running if r not in new]
            batch = len(decoding)
            lines = []
            if new:
                lines.append(self._prefill_line(new))
            if batch and step_no and step_no % self.args.decode_log_interval == 0:
                lines.append(self._decode_line())
            now = self.clock.now()
            # Two clocks. The step clock (vstart/vend, simulated seconds) advances by exactly
            # the model's step time while there is work, so statistics are deterministic
            # under machine load; it re-syncs with the wall-derived clock after idling.
            # Pacing (start/end) follows the wall: back to back with the previous step,
            # catching up a lag of up to 0.5 s of wall clock, else dropping it.
            vstart = now if last_vend is None else last_vend
            if last_vend is None:
                self.interval["t"] = vstart  # a fresh interval starts with this step
            back_to_back = last_end is not None and now <= last_end + 0.5 * self.clock.scale
            start = last_end if back_to_back and last_end is not None else now
            mode = self.ranks.step(step_no, batch, lines)
            context = (sum(r.prompt_tokens + r.generated for r in decoding) / batch) if batch else 0.0
            cold = self._decide(batch, vstart, context, bool(new), mode) if self.switch is not None and batch else False
            step_mode = (mode or model.SPECULATIVE) if self.spec else model.PLAIN
            dt = (
                model.step_ms(step_mode, batch, self.cal, context, cold) + model.prefill_ms(sum(r.prompt_tokens for r in new))
            ) / 1000.0
            end = start + dt
            delay = self.clock.wall_delay(end)
            if delay > 0 and self._stop.wait(delay):
                break
            wall = time.monotonic()
            if back_to_back and last_wall is not None:
                self.timing.add(dt / self.clock.scale, wall - last_wall)
            self.timing.lag_s = max(0.0, self.clock.now() - end) / self.clock.scale
            last_end, last_wall = end, wall
            last_vend = self._vnow = vstart + dt
            self.stats.busy_seconds += dt
            touched = produce(self, new, decoding, step_mode, cold)
            step_no += 1
            self.stats.steps = step_no
            if touched:
                self.deliver(touched)
        if self._fault_due() and not self._stop.is_set():
            self.ranks.crash()
            self.on_fatal(1, "Received sigquit from a child process. It usually means the child failed.")

    def _decide(self, batch: int, vstart: float, context: float, prefills: bool, mode: str | None) -> bool:
        """The main process's copy of the step's decision (and exploration), checked against
        the ranks' answer; the cost curves count the step in the mode it ran in. Returns
        whether the step skips the draft's extend (cold)."""
        sw = self.switch
        assert sw is not None
        sw.decide(batch, vstart)
        ran = self.explorer.mode(
            sw.mode,
            sw.steps[decision.SPECULATIVE] + sw.steps[decision.TARGET_ONLY],
            batch,
            sw.threshold,
            sw.force == decision.AUTO,
        )
        if ran != mode:
            raise RuntimeError(f"main and TP ranks disagree: {ran} vs {mode}")
        if self.curves is not None:
            self.curves.step(ran, batch, vstart, context)
            if prefills:  # this step also prefills: its time is not a decode step's cost
                self.curves.idle()
        return sw.draft_cold(batch, ran)

    def _apply_settings(self) -> None:
        while self.settings:
            key, value, fut, origin = self.settings.popleft()
            try:
                tune = self.autotune
                own = tune.on_setting(key, value, origin) if tune is not None else None
                if own is not None:
                    self.log.info(own[1])
                    fut.set_result(own)
                    continue
                ok, text = self.ranks.apply(key, value)
                if ok and self.switch is not None:
                    from server_control.sim.worker import apply_setting

                    apply_setting(self.switch, key, value)
                    line = tune.applied(key, value, origin) if tune is not None else None
                    if line:
                        self.log.info(line)
                fut.set_result((ok, text))
            except Exception as exc:  # noqa: BLE001 - report to the HTTP caller
                fut.set_exception(exc)

    def _top_up_traffic(self) -> None:
        if not self.ready:
            return
        t = self.serving_seconds()
        threshold = self.switch.threshold if self.switch else 0
        want = target_concurrency(self.args.sim_traffic, t, threshold)
        now_phase = current_phase(self.args.sim_traffic, t)
        phase = now_phase[1] if now_phase else None
        self.phase_index = now_phase[0] if now_phase else None
        p = phase.accept_p if phase and phase.accept_p is not None else None
        self.accept_p = p if p is not None else self._base_accept_p
        have = sum(1 for r in itertools.chain(self.running, self.waiting) if r.internal)
        for _ in range(max(0, want - have)):
            prompt = self.rng.randint(max(1, phase.ctx // 2), phase.ctx * 3 // 2) if phase else self.rng.randint(64, 1024)
            req = self.new_request(prompt, self.rng.randint(96, 512), internal=True)
            self.waiting.append(req)

    def _admit(self) -> list[Request]:
        new = []
        cap = self.args.max_running_requests
        used = self.stats.tokens_in_use
        while self.waiting and len(self.running) < cap:
            req = self.waiting[0]
            need = req.prompt_tokens + req.max_new_tokens
            if self.running and used + need > self.args.max_total_tokens:
                break
            self.waiting.popleft()
            if req.finished:
                continue
            used += need
            req.admitted_at = self.clock.now()
            self.running.append(req)
            new.append(req)
        self.stats.waiting = len(self.waiting)
        return new

    def _set_idle(self) -> None:
        s = self.stats
        s.running = 0
        s.tokens_in_use = 0
        s.token_usage = 0.0
        s.gen_throughput = 0.0
        self._vnow = self.clock.now()
        if self._idle_since is None:  # the idle stretch starts (activity() counts it)
            self._idle_since = self._vnow
        if self.curves is not None:
            self.curves.idle()
        self.interval = {"t": self._vnow, "tokens": 0, "spec_steps": 0, "spec_tokens": 0}

    def _close_interval(self) -> None:
        iv = self.interval
        now = self._vnow  # simulated step clock: deterministic under machine load
        elapsed = now - iv["t"]
        s = self.stats
        if elapsed > 0:
            s.gen_throughput = iv["tokens"] / elapsed
        if iv["spec_steps"]:
            s.accept_length = iv["spec_tokens"] / iv["spec_steps"]
        elif self.spec:
            s.accept_length = 1.0
        s.accept_rate = model.accept_rate(s.accept_length, self.num_steps)
        self.interval = {"t": now, "tokens": 0, "spec_steps": 0, "spec_tokens": 0}

    def _prefill_line(self, new: list[Request]) -> str:
        return logfmt.prefill_line(len(new), sum(r.prompt_tokens for r in new), self.stats, len(self.waiting))

    def _decode_line(self) -> str:
        self._close_interval()
        return logfmt.decode_line(self.stats, len(self.waiting), bool(self.spec))
