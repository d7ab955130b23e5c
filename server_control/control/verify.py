"""The three verification layers of design.md, over plain inputs.

Each layer is a ``VerifyLayer(name, status: pass|fail|pending, evidence, cause)``:
  configuration   /server_info (flat args and internal_states) holds the threshold asked
                  for (the profile's), or any threshold > 0 when attached; a threshold at
                  or above the server's running-request cap fails (it can never trigger),
                  one at or above the largest decode CUDA-graph bucket passes with a
                  warning (target-only above it runs eager);
  initialisation  every scheduler rank logged ``Dynamic speculation disable enabled:
                  threshold=N``; a ``... NOT active: <reason>`` line, /server_info saying
                  ``active: false`` (with the patch's reason) or TP ranks that disagree,
                  or a ready server without the line is a failure;
  runtime         a switch to target-only was seen when the batch exceeded N, and a switch
                  back when it dropped; a batch above N for longer than the dwell with no
                  switch is a failure, and so is target-only through decode steps at a batch
                  between 1 and the low mark for that long. An idle server (batch 0) takes
                  no decode step, decides nothing and is no evidence: pending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from server_control.model.verification import Verification, VerifyLayer
from server_control.model.vocabulary import Verdict
from server_control.protocol import decision, rank_verdict
from server_control.telemetry.sample import Sample, intval
from server_control.telemetry.series import is_forced

if TYPE_CHECKING:
    from server_control.logs import Record


DEFAULT_STEP_S = 0.1  # a conservative decode step time, to turn the dwell (steps) into seconds
POLL_MARGIN_S = 3.0  # how far a poll's view may lag the server (3 polls at the default 1 s);
#                      fixed, so every observer (screen, `specconsole verify`) judges alike
IDLE_SINCE_SWITCH = "idle since the switch; judged at the next decode step"

CAUSE_NOT_PATCHED = (
    "the server does not know the flag: not launched through "
    "server_control.sglang_patch.serve (stock SGLang, or the patch not on PYTHONPATH)"
)
CAUSE_NO_INIT = (
    "the patch was not loaded in the scheduler processes (PYTHONPATH/launcher), the "
    "speculative worker is another class than EAGLEWorkerV2, or the log goes elsewhere"
)
CAUSE_NO_SWITCH = "the gate is not on the decode path (the switch is never consulted per decode step)"


def layer(name: str, status: Verdict, evidence: str, cause: str | None = None) -> VerifyLayer:
    return VerifyLayer(name, status, evidence, cause)


def summary(layers: list[VerifyLayer]) -> Verification:
    statuses = [x.status for x in layers]
    overall = Verdict.FAIL if Verdict.FAIL in statuses else Verdict.PENDING if Verdict.PENDING in statuses else Verdict.PASS
    return Verification(overall, tuple(layers))


def _where(rec: Record) -> str:
    line = getattr(rec, "line", None)
    text = getattr(rec, "text", "")
    return f"log line {line}: {text}" if line is not None else text


# -- 1. configuration ---------------------------------------------------------------------
def limit_warnings(sample: Sample, threshold: int | None) -> list[str]:
    """Why ``threshold`` cannot work as asked on this server (decision.limit_warnings):
    the caps the patch publishes (``dynamic_speculation.limits``), else the flat resolved
    ``max_running_requests`` of /server_info."""
    if threshold is None or threshold <= 0:
        return []
    limits: dict[str, Any] = {}
    for r in sample.ranks:
        got = (r.dynamic or {}).get("limits")
        if isinstance(got, dict):
            limits = got
            break
    running = intval(limits.get("max_running_requests"))
    if running is None:
        running = intval(sample.args.get("max_running_requests"))
    return decision.limit_warnings(threshold, running, intval(limits.get("cuda_graph_max_bs")))


def _with_limits(result: VerifyLayer, sample: Sample, threshold: int | None) -> VerifyLayer:
    warnings = limit_warnings(sample, threshold)
    if result.status != Verdict.PASS or not warnings:
        return result
    evidence = f"{result.evidence}; warning: " + "; warning: ".join(warnings)
    never = [w for w in warnings if decision.NEVER_TRIGGERS in w]
    if never:  # the switch is a no-op on this server
        return layer(result.name, Verdict.FAIL, evidence, never[0])
    return layer(result.name, Verdict.PASS, evidence)


def configuration(sample: Sample | None, expected: int | None) -> VerifyLayer:
    result = _configuration(sample, expected)
    if sample is None or not sample.reachable:
        return result
    live = [r.threshold for r in sample.ranks if r.threshold is not None]
    threshold = live[0] if live else intval(sample.args.get(decision.THRESHOLD_KEY))
    return _with_limits(result, sample, threshold)


def _configuration(sample: Sample | None, expected: int | None) -> VerifyLayer:
    name = "configuration"
    if sample is None or not sample.reachable:
        why = sample.error if sample else "not polled yet"
        return layer(name, Verdict.PENDING, f"/server_info not available yet ({why})")
    flat = intval(sample.args.get(decision.THRESHOLD_KEY))
    per_rank = [r.threshold for r in sample.ranks]
    has_key = decision.THRESHOLD_KEY in sample.args or any(r.has_threshold_key for r in sample.ranks)
    ev = f"/server_info {decision.THRESHOLD_KEY}={flat}; internal_states[*].{decision.THRESHOLD_KEY}={per_rank}"
    if not has_key:
        return layer(name, Verdict.FAIL, f"/server_info has no {decision.THRESHOLD_KEY}", CAUSE_NOT_PATCHED)
    if expected is not None:
        if flat == expected:
            note = "" if all(v == expected for v in per_rank) else " (changed at runtime since)"
            return layer(name, Verdict.PASS, ev + note)
        return layer(
            name,
            Verdict.FAIL,
            ev + f"; the profile asks {expected}",
            "the running server was launched with another threshold (an adopted older run, or extra_args overriding the profile)",
        )
    if (flat or 0) > 0 or any((v or 0) > 0 for v in per_rank):
        return layer(name, Verdict.PASS, ev)
    return layer(
        name,
        Verdict.FAIL,
        ev,
        f"threshold 0 never disables speculation: launch with "
        f"--{decision.THRESHOLD_KEY.replace('_', '-')} N (N > 0) or set it at runtime",
    )


# -- 2. initialisation --------------------------------------------------------------------
def expected_ranks(tp_size: int | None, dp_size: int | None, dp_attention: bool = False) -> int:
    tp, dp = max(1, tp_size or 1), max(1, dp_size or 1)
    return tp if dp_attention else tp * dp


def switch_off(sample: Sample | None) -> tuple[str, str] | None:
    """(evidence, cause) when /server_info says the switch is off on a DP rank (the patch's
    reason) or that its TP ranks disagree; None otherwise."""
    for r in sample.ranks if sample is not None else []:
        dyn = r.dynamic or {}
        where = f"/server_info internal_states[{r.dp_rank}].{decision.STATE_KEY}"
        if dyn.get("active") is False and dyn.get("reason"):
            return f"{where}: active false", str(dyn["reason"])
        rows = dyn.get("ranks")
        problem = rank_verdict.disagreement(rows) if isinstance(rows, list) else None
        if problem:
            return f"{where}.ranks: {problem}", f"TP ranks disagree: {problem}"
    return None


def initialisation(
    init_records: list[Record],
    not_active: list[Record],
    ready_records: list[Record],
    *,
    ranks_expected: int,
    server_ready: bool,
    log_attached: bool,
    sample: Sample | None = None,
) -> VerifyLayer:
    name = "initialisation"
    if not_active:
        rec = not_active[-1]
        text = getattr(rec, "text", "") or ""
        reason = text.split(decision.NOT_ACTIVE_PREFIX, 1)[-1].strip() if decision.NOT_ACTIVE_PREFIX in text else text
        return layer(name, Verdict.FAIL, _where(rec), reason or "the patch logged that it is not active")
    off = switch_off(sample)
    if off is not None:
        return layer(name, Verdict.FAIL, *off)
    by_rank: dict[str, Record] = {}
    for rec in init_records:
        by_rank.setdefault(rec.rank or "", rec)
    seen = len(by_rank)
    if seen:
        thresholds = sorted(
            {intval(getattr(r, "threshold", None)) for r in by_rank.values()}, key=lambda v: -1 if v is None else v
        )
        first = next(iter(by_rank.values()))
        ev = (
            f"{seen}/{ranks_expected} rank(s) logged the init line "
            f"({', '.join(k or 'main' for k in by_rank)}; threshold={thresholds}); {_where(first)}"
        )
        if seen >= ranks_expected:
            return layer(name, Verdict.PASS, ev)
    else:
        ev = "no 'Dynamic speculation disable enabled' line in the log"
    if not log_attached:
        return layer(name, Verdict.PENDING, "no server log attached (give the log file to read the init line)")
    if ready_records:
        ev += f"; the server is ready ({_where(ready_records[0])})"
        if seen:
            return layer(
                name, Verdict.FAIL, ev, f"only {seen} of {ranks_expected} scheduler ranks loaded the patch: " + CAUSE_NO_INIT
            )
        return layer(name, Verdict.FAIL, ev, CAUSE_NO_INIT)
    return layer(
        name, Verdict.PENDING, ev + ("; server answers HTTP, waiting for the ready line" if server_ready else "; server starting")
    )


# -- 3. runtime ---------------------------------------------------------------------------
class SwitchWatch:
    """The runtime layer's watch (is the switch really taken?): fed every poll (``observe``);
    judged against the switch timeline (``status``).

    The verdict is a function of the samples and switch events fed in, never of the wall
    clock or of the observer's poll interval: the screen and `specconsole verify` reach one
    verdict for one server from the same evidence. Only decode steps are evidence: a poll
    with a decode batch of 0 (an idle server takes no decode step, so its switch decides
    nothing) neither counts toward a failure nor clears what was seen before it.
    """

    def __init__(self, step_s: float = DEFAULT_STEP_S) -> None:
        self.step_s = step_s
        self.max_batch: int | None = None
        self.crossed_at: float | None = None  # first time the batch was seen above N
        self.stuck_since: float | None = None  # batch > N while the polled mode stays speculative
        self.stuck_s = 0.0
        self.stuck_batch: int | None = None
        self.back_due_s = 0.0  # decode time seen at 1 <= batch <= low mark while target-only
        self._back_prev: float | None = None  # the previous such poll, if the last poll was one
        self.low: int | None = None
        self.idle = False  # the latest poll saw no decode batch
        self.last: Sample | None = None
        self.dwell_steps = decision.DEFAULT_MIN_DWELL_STEPS

    def grace_s(self) -> float:
        return POLL_MARGIN_S + self.dwell_steps * self.step_s

    def observe(self, sample: Sample) -> None:
        batch, n = sample.load.batch, sample.threshold
        if not sample.reachable or batch is None or not n:
            return
        self.last = sample
        rank = sample.ranks[0] if sample.ranks else None
        if rank and rank.min_dwell_steps is not None:
            self.dwell_steps = rank.min_dwell_steps
        low = self.low = max(1, n - (rank.hysteresis if rank and rank.hysteresis is not None else decision.DEFAULT_HYSTERESIS))
        self.max_batch = batch if self.max_batch is None else max(self.max_batch, batch)
        self.idle = batch <= 0
        mode = sample.mode
        if batch > n:
            self.crossed_at = self.crossed_at or sample.ts
        if batch > n and mode == decision.SPECULATIVE:
            self.stuck_since = self.stuck_since or sample.ts
            self.stuck_s = sample.ts - self.stuck_since
            self.stuck_batch = batch
        else:
            self.stuck_since, self.stuck_s = None, 0.0
        if mode == decision.TARGET_ONLY and self.idle:
            self._back_prev = None  # no decode step: no evidence either way
        elif mode == decision.TARGET_ONLY and batch <= low:
            if self._back_prev is not None:
                self.back_due_s += sample.ts - self._back_prev
            self._back_prev = sample.ts
        else:  # speculative, or a batch above the low mark: the switch back is not due
            self.back_due_s, self._back_prev = 0.0, None

    def status(self, events: list[dict[str, Any]]) -> VerifyLayer:
        name = "runtime"
        s = self.last
        force = s.ranks[0].force if s and s.ranks else None
        if force and force != decision.AUTO:
            return layer(name, Verdict.PENDING, f"forced mode {force}: the threshold rule is not in control")
        down = next((e for e in events if e["mode"] == decision.TARGET_ONLY and batch_driven(e)), None)
        back = None
        if down is not None:
            later = [e for e in events if e["t"] >= down["t"] and e is not down]
            back = next((e for e in later if e["mode"] == decision.SPECULATIVE and batch_driven(e)), None)
        grace = self.grace_s()
        if self.stuck_since is not None and self.stuck_s > grace:  # first: an earlier pass masks no later failure
            return layer(
                name,
                Verdict.FAIL,
                f"batch {self.stuck_batch} > threshold {s.threshold if s else '?'} for "
                f"{self.stuck_s:.1f} s (> {grace:.1f} s: {POLL_MARGIN_S:.0f} s + dwell) while "
                f"internal_states report mode=speculative and no switch was logged",
                CAUSE_NO_SWITCH,
            )
        if down and back:
            return layer(name, Verdict.PASS, f"to target-only: {_event(down)}; back to speculative: {_event(back)}")
        if down is not None:
            return self._after_down(name, down, grace)
        if self.crossed_at is None:
            if s is None or s.threshold is None or self.max_batch is None:
                return layer(name, Verdict.PENDING, "no live decode batch and threshold read from the server yet")
            return layer(
                name,
                Verdict.PENDING,
                f"the decode batch has not exceeded the threshold {s.threshold} yet (max seen {self.max_batch})",
            )
        return layer(
            name,
            Verdict.PENDING,
            f"the batch exceeded the threshold (max {self.max_batch}); waiting for the switch (minimum dwell)",
        )

    def _after_down(self, name: str, down: dict[str, Any], grace: float) -> VerifyLayer:
        """Switched to target-only, not back yet: judged on decode steps at 1..low mark only."""
        low = self.low if self.low is not None else "?"
        if self.back_due_s > grace:
            return layer(
                name,
                Verdict.FAIL,
                f"switched to target-only ({_event(down)}) but stayed there "
                f"{self.back_due_s:.1f} s of decode steps with the batch between 1 and the low "
                f"mark {low} (> {grace:.1f} s: {POLL_MARGIN_S:.0f} s + dwell)",
                "the switch back is not evaluated (hysteresis/dwell not applied on the decode path)",
            )
        if self.idle and not self.back_due_s:
            return layer(
                name,
                Verdict.PENDING,
                f"switched to target-only ({_event(down)}); {IDLE_SINCE_SWITCH} (idle time is not evidence)",
            )
        if self.idle:
            return layer(
                name,
                Verdict.PENDING,
                f"switched to target-only ({_event(down)}); idle after "
                f"{self.back_due_s:.1f} s of decode steps at batch 1..{low}; judged at the next "
                "decode step",
            )
        return layer(
            name,
            Verdict.PENDING,
            f"switched to target-only ({_event(down)}); waiting for the batch to "
            f"drop to the low mark {low} and speculation to come back",
        )


def batch_driven(e: dict[str, Any]) -> bool:
    """A switch the batch crossing made: not a forced mode's, not an operator's N=0 ("threshold
    0: never disable" switches back at any batch; a polled one shows threshold 0)."""
    if is_forced(e):
        return False
    return "never disable" not in (e.get("text") or "") and e.get("threshold") != 0


def _event(e: dict[str, Any]) -> str:
    if e.get("line") is not None:
        return f"log line {e['line']}: {e.get('text')}"
    return e.get("text") or f"{e['mode']} at batch {e.get('batch')} (threshold {e.get('threshold')})"
