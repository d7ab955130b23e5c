"""The dynamic speculation switch: one pure decision per decode step, for the whole batch.

Shared, byte for byte, by the SGLang patch (``server_control.sglang_patch``) and the
simulator (``server_control.sim``). Imports only the standard library, so it can be loaded
inside SGLang's scheduler processes without pulling in anything of ours.

Semantics (threshold N, hysteresis H, minimum dwell D steps):
  * N == 0: never disable; always speculative.
  * speculative  -> target-only when the decode batch  > N
  * target-only  -> speculative when the decode batch <= low mark = max(1, N - H)
  * a switch happens only after D decode steps in the current mode (dwell), so a batch
    hovering around N cannot flap every step.
  * a forced mode ("speculative" / "target_only") overrides the rule at once; "auto" hands
    control back to the rule.
  * steps with no decode requests (batch 0) decide nothing and count nothing.
  * cold draft above M (0 = never): a target-only step of a decode batch > M skips the
    draft's extend (SGLang's own stub for steps 0), so it costs a plain decode step; the
    draft's KV cache misses the positions decoded that way, and the requests that lived
    through them are proposed for worse after speculation resumes. At or below M (and
    with M = 0) target-only steps keep the draft warm, and so does a target-only step that
    exploration runs amid speculative ones. Not part of the rule: it never changes the
    mode, only what a target-only step runs.

Log wording (the parser in ``server_control.logs`` and verification depend on it):
  Dynamic speculation disable enabled: threshold=5, resume_at<=4, min_dwell_steps=10
  Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)
  Dynamic speculation: switched to speculative (decode batch 3 <= 4, threshold 5)
  Dynamic speculation: switched to target-only (forced)
  Dynamic speculation: threshold changed 5 -> 8 (resume_at<=7)
  Dynamic speculation disable NOT active: <reason>
"""

from __future__ import annotations

import re
import time
from typing import Any

SPECULATIVE = "speculative"
TARGET_ONLY = "target_only"
AUTO = "auto"
MODES = (SPECULATIVE, TARGET_ONLY)
FORCE_CHOICES = (AUTO, SPECULATIVE, TARGET_ONLY)

DEFAULT_HYSTERESIS = 1
DEFAULT_MIN_DWELL_STEPS = 10
MAX_THRESHOLD = 4096

# Names of the server arguments / internal-state keys (CLI: --speculative-disable-...).
THRESHOLD_KEY = "speculative_disable_batch_threshold"
HYSTERESIS_KEY = "speculative_disable_hysteresis"
DWELL_KEY = "speculative_disable_min_dwell_steps"
FORCE_KEY = "speculative_disable_force_mode"
COLD_DRAFT_KEY = "speculative_disable_cold_draft_above"
STATE_KEY = "dynamic_speculation"  # nested live state inside each internal_states entry

# What N counts: the decode requests of the step, as SGLang hands them to
# ``activate_step_by_batch`` (``batch.seq_lens.shape[0]``), never padded to a CUDA-graph size.
# SGLang's own --speculative-adaptive pads the batch to a graph size, then takes the bucket at
# or below it: its "8" and our N=8 are not the same batches.
THRESHOLD_COUNTS = "decode_requests"
THRESHOLD_COUNTS_WORDS = "decode requests in the step, raw (never padded to a CUDA-graph size)"

LOG_PREFIX = "Dynamic speculation: "
INIT_PREFIX = "Dynamic speculation disable enabled: threshold="
NOT_ACTIVE_PREFIX = "Dynamic speculation disable NOT active: "
SWITCH_PREFIX = LOG_PREFIX + "switched to "


def mode_label(mode: str) -> str:
    """'target_only' -> 'target-only' as written in log lines."""
    return mode.replace("_", "-")


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)  # not "８" (full-width) nor "٨"


def validate_int(name: str, value: object, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str) and _INT_TEXT.fullmatch(value):
            value = int(value)
        else:
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    if value > hi:
        raise ValueError(f"{name} {value} is absurd: the maximum is {hi}")
    return value


def validate_threshold(value: object) -> int:
    """An integer 0..MAX_THRESHOLD (0 = never disable). Raises ValueError with the reason."""
    return validate_int(THRESHOLD_KEY, value, 0, MAX_THRESHOLD)


def validate_hysteresis(value: object) -> int:
    return validate_int(HYSTERESIS_KEY, value, 0, MAX_THRESHOLD)


def validate_dwell(value: object) -> int:
    return validate_int(DWELL_KEY, value, 0, 1_000_000)


def validate_cold_draft(value: object) -> int:
    """An integer 0..MAX_THRESHOLD (0 = keep the draft warm at every batch)."""
    return validate_int(COLD_DRAFT_KEY, value, 0, MAX_THRESHOLD)


def validate_force(value: object) -> str:
    if isinstance(value, str):
        norm = value.strip().lower().replace("-", "_")
        if norm in FORCE_CHOICES:
            return norm
    raise ValueError(f"{FORCE_KEY} must be one of {', '.join(FORCE_CHOICES)}, got {value!r}")


NEVER_TRIGGERS = "can never trigger"
EAGER_ABOVE = "runs without CUDA graphs"
SGLANG_EAGLE_RUNNING_CAP = 48  # SGLang's max_running_requests for EAGLE unless set


def limit_warnings(threshold: int, max_running_requests: int | None, cuda_graph_max_bs: int | None) -> list[str]:
    """What makes N useless or costly on this server (empty: none). ``max_running_requests``
    is the effective cap (SGLang sets 48 for an EAGLE server unless the operator sets it);
    ``cuda_graph_max_bs`` the largest decode CUDA-graph bucket (None: graphs off)."""
    out: list[str] = []
    if threshold <= 0:
        return out
    if max_running_requests is not None and threshold >= max_running_requests:
        why = (
            f" (SGLang caps an EAGLE server at {SGLANG_EAGLE_RUNNING_CAP} running requests unless --max-running-requests is set)"
            if max_running_requests == SGLANG_EAGLE_RUNNING_CAP
            else ""
        )
        out.append(
            f"threshold {threshold} {NEVER_TRIGGERS}: the decode batch never exceeds "
            f"max_running_requests={max_running_requests}{why}"
        )
    if cuda_graph_max_bs is not None and threshold >= cuda_graph_max_bs:
        out.append(
            f"threshold {threshold} >= cuda_graph_max_bs {cuda_graph_max_bs}: target-only "
            f"above {cuda_graph_max_bs} {EAGER_ABOVE} (target verify and draft-extend "
            "eager); raise --cuda-graph-max-bs-decode or lower the threshold"
        )
    return out


def init_line(threshold: int, hysteresis: int, min_dwell_steps: int) -> str:
    low = max(1, threshold - hysteresis)
    return f"{INIT_PREFIX}{threshold}, resume_at<={low}, min_dwell_steps={min_dwell_steps}"


class SpecSwitch:
    """Per-rank state machine. Every rank feeds it the same batch sizes, so every rank
    reaches the same decision for the same step."""

    __slots__ = (
        "threshold",
        "hysteresis",
        "min_dwell_steps",
        "force",
        "mode",
        "_dwell",
        "steps",
        "switches",
        "tokens",
        "seconds",
        "last_batch",
        "last_switch",
        "_last_t",
        "verifies",
        "accepted_drafts",
        "proposed_drafts",
        "cold_draft_above",
        "cold_steps",
        "more",
    )

    def __init__(
        self,
        threshold: object = 0,
        hysteresis: object = DEFAULT_HYSTERESIS,
        min_dwell_steps: object = DEFAULT_MIN_DWELL_STEPS,
        force: object = AUTO,
        cold_draft_above: object = 0,
        **more: int | str,
    ) -> None:
        """Each setting validated here (ValueError with the reason); ``more``: runtime settings
        the rule does not read (validated by the caller), kept and published with the others."""
        self.threshold = validate_threshold(threshold)
        self.hysteresis = validate_hysteresis(hysteresis)
        self.min_dwell_steps = validate_dwell(min_dwell_steps)
        self.force = validate_force(force)
        self.cold_draft_above = validate_cold_draft(cold_draft_above)
        self.cold_steps = 0  # target-only steps that skipped the draft's extend
        self.mode = SPECULATIVE if self.force == AUTO else self.force
        self._dwell = 0
        self.steps = {SPECULATIVE: 0, TARGET_ONLY: 0}
        self.switches = {SPECULATIVE: 0, TARGET_ONLY: 0}  # keyed by the mode switched TO
        self.tokens = {SPECULATIVE: 0, TARGET_ONLY: 0}
        self.seconds = {SPECULATIVE: 0.0, TARGET_ONLY: 0.0}
        self.last_batch = 0
        self.last_switch: dict[str, Any] | None = None
        self._last_t: float | None = None
        # acceptance over verifies that drafted (steps > 0) only: per request and step
        self.verifies = 0
        self.accepted_drafts = 0
        self.proposed_drafts = 0
        self.more: dict[str, int | str] = dict(more)

    def setting(self, field: str) -> int | str:
        """A runtime setting's value by its field name (``runtime_settings.RuntimeSetting.field``)."""
        value: int | str = self.more[field] if field in self.more else getattr(self, field)
        return value

    def put(self, field: str, value: int | str) -> int | str:
        """Set a validated runtime setting by its field name, effective from the next step;
        returns the old value."""
        old = self.setting(field)
        if field in self.more:
            self.more[field] = value
        else:
            setattr(self, field, value)
        return old

    @property
    def enabled(self) -> bool:
        return self.threshold > 0 or self.force != AUTO

    @property
    def low_mark(self) -> int:
        return max(1, self.threshold - self.hysteresis)

    def decide(self, batch: int, now: float | None = None) -> str | None:
        """Decide the mode for one decode step of ``batch`` requests.

        Returns the switch log message when the mode changes on this step, else None.
        ``self.mode`` holds the mode to run this step in.
        """
        if now is not None:
            if self._last_t is not None:
                self.seconds[self.mode] += now - self._last_t
            self._last_t = now
        if batch <= 0:
            return None
        self.last_batch = batch
        message = None
        mode = self.mode
        if self.force != AUTO:
            if mode != self.force:
                message = self._switch(self.force, batch, "(forced)")
        elif self._dwell >= self.min_dwell_steps:
            n = self.threshold
            if mode == SPECULATIVE:
                if n > 0 and batch > n:
                    message = self._switch(TARGET_ONLY, batch, f"(decode batch {batch} > threshold {n})")
            elif n == 0:
                message = self._switch(SPECULATIVE, batch, "(threshold 0: never disable)")
            elif batch <= self.low_mark:
                message = self._switch(SPECULATIVE, batch, f"(decode batch {batch} <= {self.low_mark}, threshold {n})")
        self.steps[self.mode] += 1
        self._dwell += 1
        return message

    def draft_cold(self, batch: int, ran: str) -> bool:
        """Whether this step, run in ``ran`` (after exploration) with ``batch`` decode requests,
        skips the draft's extend: a target-only step above the cold mark, in a target-only
        stretch (an explored target-only step amid speculative ones stays warm: the very next
        steps speculate on the draft's KV). Counts it."""
        cold = ran == TARGET_ONLY and self.mode == TARGET_ONLY and 0 < self.cold_draft_above < batch
        if cold:
            self.cold_steps += 1
        return cold

    def _switch(self, mode: str, batch: int, why: str) -> str:
        self.mode = mode
        self._dwell = 0
        self.switches[mode] += 1
        self.last_switch = {
            "to": mode,
            "batch": batch,
            "threshold": self.threshold,
            "step": self.steps[SPECULATIVE] + self.steps[TARGET_ONLY],
            "at": round(time.time(), 3),
        }  # wall clock: observers agree on the rate
        return f"{SWITCH_PREFIX}{mode_label(mode)} {why}"

    def add_tokens(self, n: int) -> None:
        self.tokens[self.mode] += n

    def record_verify(self, accepted_per_request: list[int], draft_tokens: int, mode: str | None = None) -> None:
        """One settled verify step: tokens committed (accepted drafts + 1 per request) go
        to ``mode`` (the mode that step ran in, default the current one); acceptance is
        counted only when the step drafted (``draft_tokens`` > 1)."""
        accepted, n = sum(accepted_per_request), len(accepted_per_request)
        self.tokens[mode or self.mode] += accepted + n
        if draft_tokens > 1:
            self.verifies += n
            self.accepted_drafts += accepted
            self.proposed_drafts += (draft_tokens - 1) * n

    @property
    def accept_length(self) -> float | None:
        """Mean tokens per request per verify over the steps that drafted (None: none yet)."""
        return 1 + self.accepted_drafts / self.verifies if self.verifies else None

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready live state, published per rank in /server_info internal_states."""
        return {
            "enabled": self.enabled,
            "mode": self.mode,
            "threshold": self.threshold,
            "hysteresis": self.hysteresis,
            "low_mark": self.low_mark,
            "min_dwell_steps": self.min_dwell_steps,
            "force": self.force,
            "cold_draft_above": self.cold_draft_above,
            "cold_steps": self.cold_steps,
            "steps": dict(self.steps),
            "switches": dict(self.switches),
            "switch_count": self.switches[SPECULATIVE] + self.switches[TARGET_ONLY],
            "tokens": dict(self.tokens),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "last_batch": self.last_batch,
            "last_switch": dict(self.last_switch) if self.last_switch else None,
            "verifies": self.verifies,
            "accepted_drafts": self.accepted_drafts,
            "proposed_drafts": self.proposed_drafts,
            **self.more,
        }
