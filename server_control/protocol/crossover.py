"""The crossover and the threshold to set, from a server's cost curves (pure).

Per mode, each bucket with at least ``MIN_STEPS`` timed steps gives a step time (mean and
standard error from the summed squares) and tokens per step (likewise), i.e. tok/s at
that batch. Each mode's step time is fitted as a line in the batch, ``t(b) = a + s*b``
(weighted by steps): over the buckets both modes measured when there are at least two
(exploration, hysteresis, forced runs: the fit interpolates), else over each mode's
``FIT_BUCKETS`` buckets nearest the other mode (the speculative curve's highest batches,
the target-only curve's lowest: the fit extrapolates, and the estimate says how far).
Its tokens per request per step ``r`` (the accept length; 1 target-only) is pooled over
the same buckets.
Target-only out-produces speculation at batch b when
    b * r_T / (a_T + s_T b)  >  b * r_S / (a_S + s_S b)
    <=>  b * (r_T s_S - r_S s_T)  >  r_S a_T - r_T a_S
so the crossover (the smallest such integer b) has a closed form, and the threshold to set
is N = crossover - 1 (speculate at or below N). That is the estimate when fewer than two
buckets were measured in both modes; it extrapolates, and says how far (``extrapolated``).

Where both modes measured at least two buckets (exploration, hysteresis, forced runs) no
line is needed: each such bucket gives z = (tok/s target-only - tok/s speculative) / se,
and the crossover is the step c that fits the signs best, the c minimising
    sum over buckets below c of max(0, z)  +  sum over buckets from c of max(0, -z)
(a noisy bucket on the wrong side costs little, a clear one much). If c is the lowest such
bucket, target-only may win lower still: below the batches target-only ran, its step time
is held at its cost at the lowest of them (flat, as a weight-bound step is; a line fitted
where steps grow per token would make it ever cheaper towards batch 1), speculation's line
gives the other side, and the estimate says how far below the shared buckets the
crossover then lies (``extrapolated``).

The 95 % interval comes from a parametric bootstrap (seeded, so the same curves give the
same interval): each bucket's step time and tokens per step are drawn from normals with
their standard errors, the fit and the crossover are redone ``RESAMPLES`` times, and the
2.5th and 97.5th percentiles of the suggested N are the interval, widened where needed to
hold the suggested N itself (a step-shaped estimator's percentiles can lie beside its
point). Each draw runs the estimator the point ran (by measurement, or by the lines).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from server_control.protocol.bands import MIN_STEPS, Band, bands
from server_control.protocol.cost_curves import SPECULATIVE, TARGET_ONLY, Bucket, Curves

TRUSTED_EXTRAPOLATION = 2.0  # batches beyond the data a crossover may lie and still be advised

FIT_BUCKETS = 5
RESAMPLES = 300
MAX_N = 4096


@dataclass(frozen=True)
class Point:
    """One mode's measurement in one bucket."""

    mode: str
    lo: int
    hi: int
    batch: float  # mean batch of its steps
    steps: int
    step_s: float
    step_se: float
    tokens_per_step: float
    tokens_se: float
    tok_s: float
    tok_s_se: float


@dataclass(frozen=True)
class Fit:
    intercept_s: float
    slope_s: float
    per_request: float  # tokens per request per step
    lo: float  # batches the fit saw
    hi: float


@dataclass(frozen=True)
class Estimate:
    points: tuple[Point, ...]
    crossover: int | None  # first batch where target-only wins (None: not found)
    suggested: int | None  # the threshold to set (None: not enough data)
    interval: tuple[int, int] | None
    verdict: str  # crossover | speculation_wins | target_only_wins | insufficient
    extrapolated: float  # batches between the crossover and the nearest data of the mode that lacks it
    accept_length: float | None  # tokens per request per speculative step
    mean_context: float | None
    busy_seconds: float  # decode time the curves hold
    missing: str | None = None  # what data is missing (insufficient)
    bands: tuple[Band, ...] = ()  # both modes compared at matching batches (``bands``)

    def tok_s(self, mode: str, batch: float) -> float | None:
        fit = _fits_from(self.points).get(mode)
        return _predict(fit, batch) if fit else None


def _points(curves: Curves) -> tuple[Point, ...]:
    out = []
    for b in curves.buckets:
        p = _point(b)
        if p is not None:
            out.append(p)
    return tuple(sorted(out, key=lambda p: (p.mode, p.batch)))


def _point(b: Bucket) -> Point | None:
    if b.steps < MIN_STEPS or b.verified < MIN_STEPS or b.seconds <= 0 or b.batch_sum <= 0:
        return None
    n, k = b.steps, b.verified
    mean_t = b.seconds / n
    var_t = max(0.0, b.seconds_sq / n - mean_t**2) * n / (n - 1)
    mean_k = b.tokens / k
    var_k = max(0.0, b.tokens_sq / k - mean_k**2) * k / (k - 1)
    se_t, se_k = math.sqrt(var_t / n), math.sqrt(var_k / k)
    tok_s = mean_k / mean_t
    rel = math.sqrt((se_t / mean_t) ** 2 + ((se_k / mean_k) ** 2 if mean_k else 0.0))
    return Point(b.mode, b.lo, b.hi, b.batch_sum / n, n, mean_t, se_t, mean_k, se_k, tok_s, tok_s * rel)


def _fit(points: list[tuple[float, int, float, float]]) -> Fit | None:
    """(batch, steps, step_s, tokens_per_step) -> the line and the pooled per-request rate."""
    if not points:
        return None
    if len(points) == 1:  # one bucket tells no slope: held flat (a weight-bound step's shape)
        b, _n, t, k = points[0]
        return Fit(t, 0.0, k / b, b, b)
    w = sum(n for _b, n, _t, _k in points)
    tokens = sum(k * n for _b, n, _t, k in points)
    per_request = tokens / sum(b * n for b, n, _t, _k in points)
    mb = sum(b * n for b, n, _t, _k in points) / w
    mt = sum(t * n for _b, n, t, _k in points) / w
    sxx = sum(n * (b - mb) ** 2 for b, n, _t, _k in points)
    sxy = sum(n * (b - mb) * (t - mt) for b, n, t, _k in points)
    slope = max(0.0, sxy / sxx) if sxx > 0 else 0.0
    intercept = mt - slope * mb
    if intercept < 0:  # a step never costs less than nothing: the line through the origin's side
        slope, intercept = mt / mb, 0.0
    return Fit(intercept, slope, per_request, min(p[0] for p in points), max(p[0] for p in points))


class _Design:
    """One mode's line as far as no bootstrap draw moves it: its points' batches and step
    counts, so the weights, the mean batch, its spread and each point's lever ``n (b - mb)``.
    A draw brings only each point's step seconds and tokens per step (``_fit_drawn``), and
    the line is ``_fit``'s to the last bit: the same sums in the same order, done once."""

    __slots__ = ("index", "single", "w", "bn", "mb", "sxx", "lever", "ns", "lo", "hi")

    def __init__(self, points: tuple[Point, ...], index: list[int]) -> None:
        rows = [(points[i].batch, points[i].steps) for i in index]
        self.index = tuple(index)
        self.single = len(rows) == 1
        self.ns = tuple(n for _b, n in rows)
        self.w = sum(n for _b, n in rows)
        self.bn = sum(b * n for b, n in rows)
        self.mb = self.bn / self.w if self.w else 0.0
        self.sxx = sum(n * (b - self.mb) ** 2 for b, n in rows)
        self.lever = tuple(n * (b - self.mb) for b, n in rows)
        self.lo = min(b for b, _n in rows) if rows else 0.0
        self.hi = max(b for b, _n in rows) if rows else 0.0


def _fit_drawn(d: _Design, draws: dict[int, tuple[float, float]]) -> Fit:
    """``_fit`` of a design's points with one draw's (step seconds, tokens per step)."""
    drawn = [draws[i] for i in d.index]
    if d.single:
        t, k = drawn[0]
        return Fit(t, 0.0, k / d.lo, d.lo, d.lo)
    per_request = sum(k * n for (_t, k), n in zip(drawn, d.ns)) / d.bn
    mt = sum(t * n for (t, _k), n in zip(drawn, d.ns)) / d.w
    sxy = sum(c * (t - mt) for (t, _k), c in zip(drawn, d.lever))
    slope = max(0.0, sxy / d.sxx) if d.sxx > 0 else 0.0
    intercept = mt - slope * d.mb
    if intercept < 0:
        slope, intercept = mt / d.mb, 0.0
    return Fit(intercept, slope, per_request, d.lo, d.hi)


def _shared(points: tuple[Point, ...]) -> set[tuple[int, int]]:
    his = {m: {(p.lo, p.hi) for p in points if p.mode == m} for m in (SPECULATIVE, TARGET_ONLY)}
    return his[SPECULATIVE] & his[TARGET_ONLY]


def _nearest(points: tuple[Point, ...], mode: str) -> list[Point]:
    shared = _shared(points)
    if len(shared) >= 2:
        return [p for p in points if p.mode == mode and (p.lo, p.hi) in shared]
    mine = [p for p in points if p.mode == mode]
    mine.sort(key=lambda p: p.batch, reverse=(mode == SPECULATIVE))
    return mine[:FIT_BUCKETS]


def _nearest_index(points: tuple[Point, ...]) -> dict[str, list[int]]:
    """``_nearest`` of each mode, as positions in ``points`` (the same for every draw)."""
    where = {id(p): i for i, p in enumerate(points)}
    return {mode: [where[id(p)] for p in _nearest(points, mode)] for mode in (SPECULATIVE, TARGET_ONLY)}


def _fits_from(points: tuple[Point, ...]) -> dict[str, Fit]:
    """The lines of both modes, through the points ``_nearest`` picks (a bootstrap draw's
    lines: ``_fit_drawn``)."""
    nearest = _nearest_index(points)
    fits = {}
    for mode in (SPECULATIVE, TARGET_ONLY):
        rows = [(points[i].batch, points[i].steps, points[i].step_s, points[i].tokens_per_step) for i in nearest[mode]]
        fit = _fit(rows)
        if fit is not None:
            fits[mode] = fit
    return fits


def _predict(fit: Fit, batch: float, served: float | None = None) -> float:
    """tok/s at ``batch`` from the line's step time at ``batch`` (or at ``served`` requests'
    tokens: the step time of one batch, the tokens of another)."""
    t = fit.intercept_s + fit.slope_s * batch
    return (batch if served is None else served) * fit.per_request / t if t > 0 else float("inf")


def _crossover(fits: dict[str, Fit]) -> tuple[str, int | None]:
    s, t = fits[SPECULATIVE], fits[TARGET_ONLY]
    d = t.per_request * s.slope_s - s.per_request * t.slope_s
    c = s.per_request * t.intercept_s - t.per_request * s.intercept_s
    # target-only wins at b where b * d > c
    if d > 0:
        b = max(1, math.floor(c / d) + 1) if c > 0 else 1
        if b > MAX_N + 1:
            return "speculation_wins", None
        return ("target_only_wins" if b == 1 else "crossover"), b
    # d <= 0: target-only's lead does not grow with the batch: it wins from batch 1 or nowhere
    return ("target_only_wins", 1) if d > c else ("speculation_wins", None)


# a band both modes measured: (lo, tok/s target-only - speculative, its se, hi, mean batch)
Pair = tuple[int, float, float, int, float]


def _measured(pairs: list[Pair], draw: list[float] | None = None) -> tuple[str, int | None, float] | None:
    """The sign-step crossover over the buckets both modes measured (see the module doc);
    ``draw``: one bootstrap draw of each pair's tok/s difference."""
    if len(pairs) < 2:
        return None
    if draw is None:
        zs = [diff / se for _lo, diff, se, _hi, _b in pairs]
    else:
        zs = [d / se for d, (_lo, _diff, se, _hi, _b) in zip(draw, pairs)]
    # cost(c) = sum of max(0, z) below c + sum of max(0, -z) from c, for every c in one pass
    above = sum(-z for z in zs if z < 0)
    below = 0.0
    best, best_cost = len(zs), float("inf")
    for c, z in enumerate(zs):
        if below + above < best_cost - 1e-12:
            best, best_cost = c, below + above
        if z > 0:
            below += z
        else:
            above += z
    if below + above < best_cost - 1e-12:
        best = len(zs)
    if best == len(zs):  # speculation wins at every shared bucket: above them, the fit says
        return None
    diffs = [p[1] for p in pairs] if draw is None else draw
    cross = _within(pairs, diffs, best)
    if cross == 1:
        return "target_only_wins", 1, 0.0
    return "crossover", cross, 1.0 if best == 0 else 0.0


def _within(pairs: list[Pair], diffs: list[float], best: int) -> int:
    """Where in band ``best`` (the first one the sign step gives target-only) the crossover
    lies: where the difference's line between the band before's mean batch and this band's
    crosses zero, kept within the batches after the band before and up to this band's last
    (a band can span the crossover: its lo alone would place it up to a band too early).
    The band's lo where there is no band before, or the two do not differ in sign."""
    lo, hi, mean = pairs[best][0], pairs[best][3], pairs[best][4]
    if best == 0 or mean <= 0:
        return lo
    prev_hi, prev_mean = pairs[best - 1][3], pairs[best - 1][4]
    d0, d1 = diffs[best - 1], diffs[best]
    if not (d0 < 0 < d1) or mean <= prev_mean:
        return lo
    zero = prev_mean + (mean - prev_mean) * (-d0) / (d1 - d0)
    return max(prev_hi + 1, min(hi, math.floor(zero) + 1))


def _lowered(measured: tuple[str, int | None, float] | None, fits: dict[str, Fit]) -> tuple[str, int | None, float] | None:
    """Target-only already wins at the lowest shared bucket: it may win lower still. Below
    the batches it ran, target-only's step is held at its cost at the lowest of them (a
    step costs at least the reading of the weights: flat while that bounds it, as on a
    GPU), so a line fitted where steps grow per token never makes target-only look cheap
    where it never ran; speculation's line is used where it ran."""
    if measured is None or measured[2] == 0.0 or measured[1] is None or len(fits) < 2:
        return measured
    c = measured[1]
    s, t = fits[SPECULATIVE], fits[TARGET_ONLY]
    low = c
    while low > 1 and _predict(t, max(low - 1, t.lo), low - 1) > _predict(s, low - 1):
        low -= 1
    if low < c:
        return ("target_only_wins" if low == 1 else "crossover"), low, float(c - low + 1)
    return measured


def _by_measurement(
    pairs: list[Pair], fits: dict[str, Fit], missing: list[str], draw: list[float] | None = None
) -> tuple[str, int | None, float] | None:
    """The crossover from the bands both modes ran (``draw``: one bootstrap draw of their
    differences), or None where they do not decide it. With one band, and a mode that has
    no bucket of its own to fit, a band target-only won is the crossover."""
    measured = _lowered(_measured(pairs, draw), fits)
    if missing and measured is None and len(pairs) == 1 and (pairs[0][1] if draw is None else draw[0]) > 0:
        measured = ("target_only_wins" if pairs[0][0] == 1 else "crossover", pairs[0][0], 1.0)
    return measured


def _draw_diffs(pairs: list[Pair], rng: random.Random) -> list[float]:
    return [rng.gauss(diff, se) for _lo, diff, se, _hi, _b in pairs]


def _suggest(verdict: str, crossover: int | None) -> int:
    if verdict == "speculation_wins" or crossover is None:
        return 0  # never disable
    return max(1, crossover - 1)  # N = 1 is the least that still disables


def estimate(curves: Curves, seed: int = 0, split: int | None = None) -> Estimate:
    """The crossover of ``curves``; ``split``: the threshold the curves were measured at
    (bands never straddle it)."""
    points = _points(curves)
    busy = sum(b.seconds for b in curves.buckets)
    spec = [p for p in points if p.mode == SPECULATIVE]
    ctx_rows = [(b.context_sum, b.steps) for b in curves.buckets if b.context_sum is not None]
    mean_ctx = sum(c for c, _n in ctx_rows) / sum(n for _c, n in ctx_rows) if ctx_rows and sum(n for _c, n in ctx_rows) else None
    fits = _fits_from(points)
    accept = fits[SPECULATIVE].per_request if SPECULATIVE in fits else None
    shared = bands(curves, split)
    pairs = [(b.lo, b.diff, b.se, b.hi, b.batch) for b in shared]
    missing = [m for m in (SPECULATIVE, TARGET_ONLY) if m not in fits]
    if missing and not pairs:
        return Estimate(
            points,
            None,
            None,
            None,
            "insufficient",
            0.0,
            accept,
            mean_ctx,
            busy,
            f"no {' or '.join(m.replace('_', '-') for m in missing)} steps measured yet "
            f"(at least {MIN_STEPS} steps in a batch bucket)",
            shared,
        )
    measured = _by_measurement(pairs, fits, missing)
    verdict, cross = measured[:2] if measured else _crossover(fits) if not missing else ("speculation_wins", None)
    suggested = _suggest(verdict, cross)
    rng = random.Random(seed)
    draws_n = []
    nearest = _nearest_index(points)
    used = sorted({*nearest[SPECULATIVE], *nearest[TARGET_ONLY]})  # only these enter the lines
    designs = {mode: _Design(points, nearest[mode]) for mode in (SPECULATIVE, TARGET_ONLY) if nearest[mode]}
    spread = [(i, points[i].step_s, points[i].step_se, points[i].tokens_per_step, points[i].tokens_se) for i in used]
    for _ in range(RESAMPLES):
        # the same estimator on each draw: by measurement where the point estimate was
        again = _by_measurement(pairs, fits, missing, _draw_diffs(pairs, rng)) if measured or missing else None
        if again is not None:
            v, c = again[0], again[1]
        elif missing:
            v, c = "speculation_wins", None
        else:
            gauss = rng.gauss
            draws = {i: (max(1e-9, gauss(t, t_se)), max(0.0, gauss(k, k_se))) for i, t, t_se, k, k_se in spread}
            v, c = _crossover({mode: _fit_drawn(d, draws) for mode, d in designs.items()})
        draws_n.append(_suggest(v, c))
    draws_n.sort()
    # a percentile interval of a step-shaped estimator can lie beside its own point (a
    # crossover extrapolated from near-parallel lines jumps between draws): it is widened
    # to hold the suggestion, so an interval never disowns the N it is shown with
    lo_n, hi_n = draws_n[int(0.025 * (len(draws_n) - 1))], draws_n[math.ceil(0.975 * (len(draws_n) - 1))]
    interval = (min(lo_n, suggested), max(hi_n, suggested))
    # how far the crossover (or the verdict) lies beyond the batches each mode measured
    if measured is not None:
        extrapolated = measured[2]
        if extrapolated > 0 and split is not None and cross is not None and cross > split + 1:
            # target-only won the lowest band, above N: between N and that band no batch was
            # compared, so a crossover there is a guess as far as the gap reaches
            extrapolated = max(extrapolated, float(cross - split) + 1.0)
    elif missing:  # speculation won every band, and a mode lacks a bucket of its own: unknown above
        extrapolated = float(MAX_N)
    elif cross is None:  # speculation wins everywhere: where target-only ran, spec is a guess
        extrapolated = max(0.0, max(p.batch for p in points) - max(p.batch for p in spec))
    else:
        tgt_low = min(p.batch for p in points if p.mode == TARGET_ONLY)
        extrapolated = max(0.0, cross - max(p.batch for p in spec), tgt_low - cross + 1)
    return Estimate(points, cross, suggested, interval, verdict, extrapolated, accept, mean_ctx, busy, None, shared)
