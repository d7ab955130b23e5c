"""What one decode step of the simulated scheduler produces (scheduler.py): tokens per
request (a speculative step's accepted drafts sampled from the acceptance model), the
step's and the interval's counters, the verify result the switch and the cost curves
count, and the finished requests taken out of the running batch."""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from server_control.protocol import cost_curves, decision
from server_control.sim import model

if TYPE_CHECKING:
    from server_control.sim.requests import Request, SimClock
    from server_control.sim.stats import Stats


class StepHost(Protocol):
    """What a step reads and counts on (the scheduler, scheduler.py)."""

    args: argparse.Namespace
    clock: SimClock
    rng: random.Random
    accept_p: float
    num_steps: int
    cal: model.Calibration
    running: list[Request]
    stats: Stats
    switch: decision.SpecSwitch | None
    curves: cost_curves.CostCounters | None
    latency_sink: Callable[[str, float, int], None] | None
    interval: dict[str, float]
    spec_steps_total: int
    spec_tokens_total: int


def _ignore(kind: str, seconds: float, n: int) -> None:
    return None


def _tokens(sched: StepHost, req: Request, spec: bool, cold: bool) -> int:
    """What one decoding request commits in this step (before its length caps it)."""
    n = model.sample_accept(sched.rng, sched.accept_p, sched.num_steps) if spec else 1
    if cold:
        req.cold_debt = sched.cal.cold_recovery_steps
    elif spec and req.cold_debt > 0:
        req.cold_debt -= 1
        n = 1  # the draft proposes from the holes in its KV cache
    return n


def produce(sched: StepHost, new: list[Request], decoding: list[Request], step_mode: str, cold: bool = False) -> list[Any]:
    """The tokens of one step: the first token of each request ``new`` (prefilled), the
    accepted drafts + 1 of each ``decoding`` request (1 when the step is not speculative;
    1 too while the request still recovers from a cold stretch: ``cold`` marks a target-only
    step that skipped the draft's extend, after which each of its requests accepts no draft
    for ``cold_recovery_steps`` speculative steps);
    the switch and the cost curves told what the verify accepted; finished requests dropped
    from the running batch. Returns the waiters to wake."""
    touched = []
    spec = step_mode == model.SPECULATIVE
    iv = sched.interval
    produced = 0
    accepted: list[int] = []  # drafts accepted per decoding request (the patch's count)
    now = sched.clock.now()
    observe = sched.latency_sink or _ignore
    for req in new:
        if req.finished:
            continue
        req.generated = 1
        req.first_token_at = req.last_token_at = now
        observe("ttft", now - req.created, 1)
        if req.admitted_at is not None:
            observe("queue", req.admitted_at - req.created, 1)
        sched.stats.prompt_tokens_total += req.prompt_tokens
        produced += 1
    for req in decoding:
        if req.finished:
            continue
        n = min(_tokens(sched, req, spec, cold), req.max_new_tokens - req.generated)
        req.generated += n
        produced += n
        accepted.append(n - 1)
        if n > 0 and req.last_token_at is not None:  # as SGLang: the interval shared by the tokens it brought
            observe("itl", (now - req.last_token_at) / n, n)
        req.last_token_at = now
        if spec:
            req.spec_steps += 1
            req.spec_tokens += n
            iv["spec_steps"] += 1
            iv["spec_tokens"] += n
            sched.spec_steps_total += 1
            sched.spec_tokens_total += n
    iv["tokens"] += produced
    if sched.switch is not None and accepted:
        ran = decision.SPECULATIVE if spec else decision.TARGET_ONLY
        sched.switch.record_verify(accepted, sched.num_steps + 1 if spec else 1, ran)
        if sched.curves is not None:
            sched.curves.commit(ran, len(accepted), sum(accepted) + len(accepted))
    sched.stats.generation_tokens_total += produced
    keep = []
    in_use = 0
    for req in sched.running:
        if req.generated >= req.max_new_tokens and not req.finished:
            req.finished = True
            sched.stats.finished_total += 1
            observe("e2e", now - req.created, 1)
        if req.waiter is not None:
            touched.append(req.waiter)
        if not req.finished:
            keep.append(req)
            in_use += req.prompt_tokens + req.generated
    sched.running = keep
    s = sched.stats
    s.running = len(keep)
    s.tokens_in_use = in_use
    s.token_usage = in_use / sched.args.max_total_tokens
    return touched
