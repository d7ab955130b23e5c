"""Both modes compared at matching batch sizes: the bands the crossover is measured on (pure).

A bucket's two modes can hold different batch mixes (above 32 buckets were powers of two;
even exact buckets see one mode more at one end), so comparing their tok/s compares
different batches. A band is a run of consecutive exact batches both modes ran, each batch
weighted alike in both modes (the fewer of its two step counts), grouped from the lowest
until each mode has ``MIN_STEPS`` steps on the matched mix; no band straddles the threshold.
Its matched mix's mean batch says where in the band its comparison speaks for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY, Bucket, Curves

MIN_STEPS = 8


@dataclass(frozen=True)
class Band:
    """Consecutive exact batches both modes ran, compared on the same batch mix: each
    batch weighs min(steps speculative, steps target-only) in both modes' tok/s, so the
    modes are compared at matching batch sizes (never a bucket's different mean batches)."""

    lo: int
    hi: int
    speculative: float  # tok/s on the band's matched mix
    target_only: float
    se: float  # of target_only - speculative
    steps: int  # the fewer steps of the two modes
    batch: float = 0.0  # the matched mix's mean batch (0: unknown, the band's lo stands for it)

    @property
    def diff(self) -> float:
        return self.target_only - self.speculative


def _band_rate(rows: list[tuple[float, Bucket]]) -> tuple[float, float]:
    """(tok/s, its se) of one mode over (weight, bucket) rows: the weighted mean tokens per
    step over the weighted mean step time; se from the pooled within-batch variances."""
    w_t = sum(w * b.seconds / b.steps for w, b in rows)
    w_k = sum(w * b.tokens / b.verified for w, b in rows)
    n = sum(b.steps for _w, b in rows)
    k = sum(b.verified for _w, b in rows)
    df_t = sum(b.steps - 1 for _w, b in rows)
    df_k = sum(b.verified - 1 for _w, b in rows)
    var_t = sum(max(0.0, b.seconds_sq - b.seconds**2 / b.steps) for _w, b in rows) / df_t if df_t > 0 else 0.0
    var_k = sum(max(0.0, b.tokens_sq - b.tokens**2 / b.verified) for _w, b in rows) / df_k if df_k > 0 else 0.0
    ws = sum(w for w, _b in rows)
    mean_t, mean_k = w_t / ws, w_k / ws
    tok_s = mean_k / mean_t
    rel = math.sqrt(var_t / n / mean_t**2 + (var_k / k / mean_k**2 if mean_k else 0.0))
    return tok_s, tok_s * rel


def bands(curves: Curves, split: int | None = None) -> tuple[Band, ...]:
    """The exact batches (lo == hi) both modes ran, grouped from the lowest into bands of at
    least ``MIN_STEPS`` steps of each mode's on the matched mix (a short last group joins the
    band before it); no band holds both ``split`` and ``split + 1`` (the threshold: each side
    of it is judged on its own)."""
    by: dict[int, dict[str, Bucket]] = {}
    for b in curves.buckets:
        if b.lo == b.hi and b.steps > 0 and b.verified > 0 and b.seconds > 0:
            by.setdefault(b.lo, {})[b.mode] = b
    rows = []
    for batch in sorted(by):
        d = by[batch]
        if SPECULATIVE in d and TARGET_ONLY in d:
            s, t = d[SPECULATIVE], d[TARGET_ONLY]
            rows.append((float(min(s.steps, t.steps)), s, t))
    groups: list[list[tuple[float, Bucket, Bucket]]] = []
    for side in (rows, []) if split is None else ([r for r in rows if r[1].lo <= split], [r for r in rows if r[1].lo > split]):
        done: list[list[tuple[float, Bucket, Bucket]]] = []
        open_group: list[tuple[float, Bucket, Bucket]] = []
        for row in side:
            open_group.append(row)
            if sum(w for w, _s, _t in open_group) >= MIN_STEPS:
                done.append(open_group)
                open_group = []
        if open_group and done:
            done[-1].extend(open_group)
        groups.extend(done)
    out = []
    for g in groups:
        spec, spec_se = _band_rate([(w, s) for w, s, _t in g])
        tgt, tgt_se = _band_rate([(w, t) for w, _s, t in g])
        steps = int(sum(w for w, _s, _t in g))
        mean_batch = sum(w * s.lo for w, s, _t in g) / sum(w for w, _s, _t in g)
        out.append(Band(g[0][1].lo, g[-1][1].lo, spec, tgt, max(1e-9, math.hypot(spec_se, tgt_se)), steps, mean_batch))
    return tuple(out)
