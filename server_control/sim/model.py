"""The simulator's throughput model: pure functions, no time, no I/O.

Step time per decode step for the whole batch (milliseconds), a smooth saturation curve
    t(b) = (t0**4 + (b * c)**4) ** (1/4)
fitted to the seed's measurements on the real server:
  * plain decode (no speculation):   t0 = 12.8 ms, c = 1.294 ms -> saturates at ~773 tok/s
  * EAGLE-3 (3 steps, topk 1):       t0 = 29.7 ms, c = 8.05 ms  -> ~96 tok/s at b=1,
    accept length ~2.85 per request per step                     -> saturates at ~354 tok/s
  * target-only inside the patched server: the plain step plus ~5 % draft-extend overhead
    (the draft KV is kept warm), accept length 1.0; above the cold mark (cold_draft_above)
    the plain step itself; each request that lived through such a step accepts no draft for
    its next ``cold_recovery_steps`` speculative steps (default 0: the patched server catches
    the draft up in one extend before it resumes, whose cost is not modelled; 12: the CPU
    rig's trained pair without the catch-up, the draft reading the holes in its KV cache).
The throughput curves cross near batch 4-5.

Context length and acceptance move the crossover (``--sim-kv-cost``, phased traffic):
each request reads its KV cache once per step, ``kv`` ms per 1000 context tokens, the
same for a plain decode and for a verify of all draft tokens; the draft model's KV adds
``draft_kv_share`` of it:
    T_target(b, L) = plain(b) * (1 + overhead) + b * L/1000 * kv
    T_spec(b, L)   = spec(b)                  + b * L/1000 * kv * (1 + draft_kv_share)
    tok/s: target b / T_target, speculative b * A(p) / T_spec, A(p) = 1 + p + ... + p^steps
so target-only wins from the smallest b with T_spec(b, L) > A(p) * T_target(b, L): a
higher acceptance or a longer context (when A > 1 + draft_kv_share) moves it up.
With ``kv`` = 0 (the default) the model is the short-context calibration above.

A GPU's shape (``flat_then_linear``): a step costs the reading of the weights, F ms, while
that bounds it, then c ms per token it computes (b tokens target-only, b * k speculative:
k = draft steps + 1 verified per request), the draft model adding D ms; the same saturation
curve with a high ``power`` (a knee of ~4 % at power 16):
    T_target(b) ~ max(F, c b) * (1 + overhead),   T_spec(b) ~ max(F + D, c k b)
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SPECULATIVE = "speculative"
TARGET_ONLY = "target_only"
PLAIN = "plain"  # no speculative algorithm configured at all
STEP_MODES = (SPECULATIVE, TARGET_ONLY, PLAIN)


@dataclass(frozen=True)
class Calibration:
    plain_t0_ms: float = 12.8
    plain_c_ms: float = 1.294
    spec_t0_ms: float = 29.7
    spec_c_ms: float = 8.05
    accept_length: float = 2.85  # mean tokens per request per speculative step
    calibrated_num_steps: int = 3  # draft steps the accept length was measured with
    target_only_overhead: float = 0.05
    prefill_base_ms: float = 3.0  # per prefill batch
    prefill_per_token_ms: float = 0.015
    power: float = 4.0
    kv_ms_per_ktoken: float = 0.0  # per request per step per 1000 context tokens
    draft_kv_share: float = 0.1  # the draft model's KV reads, as a share of the target's
    cold_recovery_steps: int = 0  # speculative steps without an accepted draft after a cold stretch (0: caught up)


DEFAULT = Calibration()
FLAT_POWER = 16.0


def flat_then_linear(
    flat_ms: float, ms_per_token: float, accept_length: float, draft_ms: float = 3.0, num_steps: int = 3
) -> Calibration:
    """A GPU-shaped calibration: flat at ``flat_ms`` while weight-bound, then linear in the
    step's tokens (``num_steps`` + 1 per request speculative, 1 target-only)."""
    return Calibration(
        plain_t0_ms=flat_ms,
        plain_c_ms=ms_per_token,
        spec_t0_ms=flat_ms + draft_ms,
        spec_c_ms=ms_per_token * (num_steps + 1),
        accept_length=accept_length,
        calibrated_num_steps=num_steps,
        power=FLAT_POWER,
    )


def _curve(t0: float, c: float, batch: int, power: float) -> float:
    return float((t0**power + (batch * c) ** power) ** (1.0 / power))


def plain_step_ms(batch: int, cal: Calibration = DEFAULT) -> float:
    return _curve(cal.plain_t0_ms, cal.plain_c_ms, batch, cal.power)


def spec_step_ms(batch: int, cal: Calibration = DEFAULT) -> float:
    return _curve(cal.spec_t0_ms, cal.spec_c_ms, batch, cal.power)


def kv_ms(mode: str, batch: int, context: float, cal: Calibration = DEFAULT) -> float:
    """KV-cache reads of one step: ``batch`` requests of mean ``context`` tokens."""
    base = batch * context / 1000.0 * cal.kv_ms_per_ktoken
    return base * (1.0 + cal.draft_kv_share) if mode == SPECULATIVE else base


def step_ms(mode: str, batch: int, cal: Calibration = DEFAULT, context: float = 0.0, cold: bool = False) -> float:
    """Decode step time of one step of ``batch`` requests (mean ``context`` tokens) in ``mode``
    (``cold``: a target-only step that skips the draft's extend)."""
    if batch <= 0:
        return 0.0
    kv = kv_ms(mode, batch, context, cal) if context > 0 and cal.kv_ms_per_ktoken else 0.0
    if mode == SPECULATIVE:
        return spec_step_ms(batch, cal) + kv
    if mode == TARGET_ONLY:
        return plain_step_ms(batch, cal) * (1.0 if cold else 1.0 + cal.target_only_overhead) + kv
    if mode == PLAIN:
        return plain_step_ms(batch, cal) + kv
    raise ValueError(f"unknown step mode {mode!r}; expected one of {', '.join(STEP_MODES)}")


def prefill_ms(new_tokens: int, cal: Calibration = DEFAULT) -> float:
    """Extra time of a step that also prefills ``new_tokens`` prompt tokens."""
    if new_tokens <= 0:
        return 0.0
    return cal.prefill_base_ms + new_tokens * cal.prefill_per_token_ms


def mean_accept_length(mode: str, cal: Calibration = DEFAULT) -> float:
    return cal.accept_length if mode == SPECULATIVE else 1.0


def throughput(
    mode: str, batch: int, cal: Calibration = DEFAULT, context: float = 0.0, accept_length: float | None = None
) -> float:
    """Expected generated tokens per second at a steady decode batch (``accept_length``:
    mean tokens per request per speculative step, default the calibration's)."""
    if batch <= 0:
        return 0.0
    a = mean_accept_length(mode, cal)
    if accept_length is not None and mode == SPECULATIVE:
        a = accept_length
    return batch * a / (step_ms(mode, batch, cal, context) / 1000.0)


def crossover(
    cal: Calibration = DEFAULT,
    other: str = TARGET_ONLY,
    limit: int = 4096,
    context: float = 0.0,
    accept_length: float | None = None,
) -> int | None:
    """Smallest batch at which ``other`` out-produces speculation (None if never)."""
    for b in range(1, limit + 1):
        if throughput(other, b, cal, context) > throughput(SPECULATIVE, b, cal, context, accept_length):
            return b
    return None


def expected_accept(p: float, num_steps: int) -> float:
    """Mean accepted tokens per step when each draft token is accepted with probability p
    in sequence (stop at the first rejection), plus the bonus token."""
    return 1.0 + sum(p**k for k in range(1, num_steps + 1))


def accept_probability(cal: Calibration = DEFAULT) -> float:
    """Per-draft-token acceptance probability giving the calibrated mean accept length."""
    lo, hi = 0.0, 1.0
    target = cal.accept_length
    n = cal.calibrated_num_steps
    if target >= n + 1:
        return 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_accept(mid, n) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def sample_accept(rng: random.Random, p: float, num_steps: int) -> int:
    """Tokens produced by one request in one speculative step: 1 .. num_steps + 1."""
    n = 1
    for _ in range(num_steps):
        if rng.random() >= p:
            break
        n += 1
    return n


def accept_rate(accept_length: float, num_steps: int) -> float:
    """Share of draft tokens accepted (SGLang's `accept rate`)."""
    if num_steps <= 0:
        return 0.0
    return max(0.0, min(1.0, (accept_length - 1.0) / num_steps))
