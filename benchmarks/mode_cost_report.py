"""``benchmarks.mode_cost``'s report: its arms' names, the summary of an interleaved run
(medians, ratios, the crossover, round-by-round pairs and the A/A comparison) and the table
it prints. No servers, no traffic: ``mode_cost`` measures, this reads what it measured."""

from __future__ import annotations

import math
import statistics

from server_control.bench import loadgen
from server_control.protocol import decision

PLAIN, SPEC, TARGET, AUTO = "plain", decision.SPECULATIVE, decision.TARGET_ONLY, decision.AUTO
ADAPTIVE, ADAPTIVE_TUNED = "sglang_adaptive", "sglang_adaptive_tuned"
AUTO_ADAPTIVE = "auto_adaptive"  # the patch's threshold beside SGLang's adaptive controller
TARGET_COLD = "target_only_cold"  # the patched server forced target-only, the cold-draft mark at 1
AUTO_COLD = "auto_cold"  # the patched server at N with the cold-draft mark at N
ARMS = (PLAIN, SPEC, TARGET, TARGET_COLD, AUTO, AUTO_COLD, AUTO_ADAPTIVE, ADAPTIVE, ADAPTIVE_TUNED)
OURS = (AUTO, AUTO_COLD, AUTO_ADAPTIVE, TARGET_COLD)
ARM_WORDS = {
    TARGET: "target-only",
    TARGET_COLD: "target-only, draft cold",
    AUTO_COLD: "auto, draft cold above N",
    AUTO_ADAPTIVE: "auto + SGLang adaptive",
    ADAPTIVE: "SGLang adaptive",
    ADAPTIVE_TUNED: "SGLang adaptive tuned",
}


def _cell(result: dict, arm: str, c: int) -> dict | None:
    return next((r for r in result["per_mode"].get(arm, []) if r["concurrency"] == c), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _by_round(cells: dict[str, dict | None]) -> list[dict[str, float]]:
    """tok/s of every arm, round by round (the arms of one round ran back to back)."""
    by_round: dict[int, dict[str, float]] = {}
    for arm, cell in cells.items():
        for row in (cell or {}).get("rounds") or []:
            if row.get("round") is not None:
                by_round.setdefault(int(row["round"]), {})[arm] = float(row["tok_s"])
    return [tok for _, tok in sorted(by_round.items())]


def paired(cells: dict[str, dict | None], ours: str, rival: str) -> list[float]:
    """``ours`` over ``rival`` round by round: a drift of the machine between rounds cancels."""
    return [t[ours] / t[rival] for t in _by_round(cells) if ours in t and t.get(rival)]


# two-sided 95 % quantiles of Student's t by degrees of freedom (1.96 past the table)
_T95 = (
    12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13,
    2.12, 2.11, 2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04,
)  # fmt: skip


def _t95(df: int) -> float:
    """Rounded up past the table (40 df: 2.04 for 2.02), so an interval is never too narrow."""
    if df <= len(_T95):
        return _T95[df - 1]
    return 2.04 if df < 60 else 2.00 if df < 120 else 1.98


def paired_interval(ratios: list[float]) -> dict | None:
    """The geometric mean of paired ratios and its 95 % interval (Student's t on their logs):
    what an A/A comparison can claim. Ratios multiply, so the logs are what average; a drift
    of the machine between rounds cancels within each pair. None below two pairs."""
    logs = [math.log(r) for r in ratios if r > 0]
    if len(logs) < 2:
        return None
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = _t95(len(logs) - 1) * sd / math.sqrt(len(logs))
    return {"n": len(logs), "mean": math.exp(mean), "low": math.exp(mean - half), "high": math.exp(mean + half)}


def own_mode(cells: dict[str, dict | None]) -> str | None:
    """The forced arm of the mode auto ran at this level (all its steps one mode), else None:
    auto against it is the same server in the same mode, an A/A comparison whose spread is
    what this machine's windows cannot resolve."""
    share = (cells.get(AUTO) or {}).get("target_only_share")
    mode = {0.0: SPEC, 1.0: TARGET}.get(share) if share is not None else None
    return mode if mode in cells else None


def _a_a(cells: dict[str, dict | None]) -> dict:
    mode = own_mode(cells)
    by_round = paired(cells, AUTO, mode or "")
    return {"mode": mode, "by_round": by_round, "interval": paired_interval(by_round)}


def _ours_intervals(cells: dict[str, dict | None]) -> dict[str, dict[str, dict]]:
    """Each of our arms over each rival (not ours; for the cold auto also the forced cold
    target-only arm, one server, the mode it runs above N): the geometric mean of the round-by-round
    ratios and its 95 % interval. With ``--relaunch`` each round's pair is one launch of each
    server, so the interval carries the launches' own speeds, which are what it averages over."""
    out: dict[str, dict[str, dict]] = {}
    for ours in (AUTO, AUTO_COLD):
        if ours not in cells:
            continue
        for rival in cells:
            fixed = rival not in OURS or (ours, rival) == (AUTO_COLD, TARGET_COLD)  # the cold auto's own fixed arm
            if fixed and (iv := paired_interval(paired(cells, ours, rival))):
                out.setdefault(ours, {})[rival] = iv
    return out


def summarise(result: dict, levels: list[int], threshold: int | None = None) -> dict:
    rows = []
    for c in levels:
        cells = {arm: _cell(result, arm, c) for arm in ARMS if arm in result["per_mode"]}
        tok = {arm: (cell["tok_s"] if cell else None) for arm, cell in cells.items()}
        ms = {arm: (cell["ms_per_step"] if cell else None) for arm, cell in cells.items()}
        tok.update({a: None for a in (PLAIN, SPEC, TARGET, AUTO) if a not in tok})
        ms.update({a: None for a in (PLAIN, SPEC, TARGET, AUTO) if a not in ms})
        best = max((v for v in (tok[SPEC], tok[TARGET]) if v is not None), default=None)
        others = max((v for a, v in tok.items() if a not in OURS and v is not None), default=None)
        rows.append(
            {
                "concurrency": c,
                "tok_s": tok,
                "ms_per_step": ms,
                "tok_s_runs": {a: cell["tok_s_runs"] for a, cell in cells.items() if cell},
                "ms_per_step_runs": {a: cell["ms_per_step_runs"] for a, cell in cells.items() if cell},
                "target_only_share": {a: cell["target_only_share"] for a, cell in cells.items() if cell},
                "leftover": {a: [r.get("leftover") for r in cell["rounds"]] for a, cell in cells.items() if cell},
                "target_only_over_plain_tok_s": _ratio(tok[TARGET], tok[PLAIN]),
                "plain_over_target_only_ms": _ratio(ms[PLAIN], ms[TARGET]),
                "auto_over_best_fixed": _ratio(tok[AUTO], best),
                "auto_over_best_other": _ratio(tok[AUTO], others),
                "auto_adaptive_over_best_other": _ratio(tok.get(AUTO_ADAPTIVE), others),
                "auto_cold_over_best_other": _ratio(tok.get(AUTO_COLD), others),
                "auto_cold_over_rival_by_round": {a: paired(cells, AUTO_COLD, a) for a in cells if a not in OURS},
                "auto_over_rival_by_round": {a: paired(cells, AUTO, a) for a in cells if a not in OURS},
                "a_a": _a_a(cells),
                "ours_over_rival_interval": _ours_intervals(cells),
                "cold_over_plain_tok_s": _ratio(tok.get(TARGET_COLD), tok[PLAIN]),
                "plain_over_cold_ms": _ratio(ms[PLAIN], ms.get(TARGET_COLD)),
                "warm_over_cold_ms": _ratio(ms.get(TARGET_COLD), ms[TARGET]),
                "cold_over_plain_by_round": paired(cells, TARGET_COLD, PLAIN),
                "cold_over_warm_by_round": paired(cells, TARGET_COLD, TARGET),
            }
        )
    all_cells = [cell for rows_ in result["per_mode"].values() for cell in rows_]
    per_spec = {c: _cell(result, SPEC, c) for c in levels}
    cross = loadgen.crossover(
        {SPEC: [x for x in per_spec.values() if x], TARGET: [x for x in (_cell(result, TARGET, c) for c in levels) if x]}
    )
    return {
        "levels": levels,
        "rows": rows,
        "crossover": cross,
        "auto_threshold": threshold,
        "errors": sum(cell["errors"] for cell in all_cells),
        "problems": [p for cell in all_cells for p in cell["problems"]],
        "arms": [a for a in ARMS if a in result["per_mode"]],
        "rounds": result["per_mode"],
    }


def _f(v: float | None, fmt: str = ".1f") -> str:
    return "-" if v is None else format(v, fmt)


def render(summary: dict) -> str:
    arms = summary.get("arms") or [PLAIN, SPEC, TARGET, AUTO]
    ratios: tuple[str, ...] = ("t-o / plain (per step)", "t-o / plain (tok/s)", "auto / max(spec, t-o)", "auto / best other arm")
    keys: tuple[str, ...] = (
        "plain_over_target_only_ms",
        "target_only_over_plain_tok_s",
        "auto_over_best_fixed",
        "auto_over_best_other",
    )
    if AUTO_ADAPTIVE in arms:
        ratios += ("auto + adaptive / best other arm",)
        keys += ("auto_adaptive_over_best_other",)
    if TARGET_COLD in arms:
        ratios += ("t-o cold / plain (per step)", "t-o warm / t-o cold (per step)")
        keys += ("plain_over_cold_ms", "warm_over_cold_ms")
    if AUTO_COLD in arms:
        ratios += ("auto cold / best other arm",)
        keys += ("auto_cold_over_best_other",)
    head = "| c | " + " | ".join(ARM_WORDS.get(a, a) for a in arms) + " | " + " | ".join(ratios) + " |"
    lines = [head, "| " + " | ".join("---" for _ in range(1 + len(arms) + len(ratios))) + " |"]
    for r in summary["rows"]:
        cells = [f"{_f(r['tok_s'][a])} ({_f(r['ms_per_step'][a], '.2f')} ms)" for a in arms]
        lines.append(
            f"| {r['concurrency']} | " + " | ".join(cells) + " | " + " | ".join(_f(r.get(k), ".2f") for k in keys) + " |"
        )
    cross = summary["crossover"]
    lines.append(
        "tok/s (ms per decode step, the server's decode-pass counter), median of the "
        "rounds; crossover: "
        + (f"target-only wins from concurrency {cross}" if cross else "none (speculation never lost)")
        + f"; auto at threshold {summary['auto_threshold']}"
        + (f", hysteresis {summary['auto_hysteresis']}" if summary.get("auto_hysteresis") is not None else "")
        + (f"; {summary['errors']} failed requests" if summary["errors"] else "")
    )
    same = [
        f"c={r['concurrency']} " + " ".join(f"{v:.2f}" for v in r["a_a"]["by_round"])
        for r in summary["rows"]
        if r.get("a_a", {}).get("by_round")
    ]
    if same:
        lines.append("A/A, auto / the forced arm of the mode it ran (one server, one mode), round by round: " + "; ".join(same))
    spans = [
        f"c={r['concurrency']} {iv['mean']:.3f} ({iv['low']:.3f}-{iv['high']:.3f}, {iv['n']} pairs)"
        for r in summary["rows"]
        if (iv := (r.get("a_a") or {}).get("interval"))
    ]
    if spans:
        lines.append("A/A geometric mean (95 % interval): " + "; ".join(spans))
    spans = [
        f"c={r['concurrency']} {ARM_WORDS.get(ours, ours)} / {ARM_WORDS.get(rival, rival)} "
        f"{iv['mean']:.3f} ({iv['low']:.3f}-{iv['high']:.3f}, {iv['n']} rounds)"
        for r in summary["rows"]
        for ours, by_rival in (r.get("ours_over_rival_interval") or {}).items()
        for rival, iv in by_rival.items()
    ]
    if spans:
        lines.append("ours / each rival, geometric mean of the rounds (95 % interval): " + "; ".join(spans))
    for key, words in (("cold_over_plain_by_round", "t-o cold / plain"), ("cold_over_warm_by_round", "t-o cold / t-o warm")):
        pairs = [f"c={r['concurrency']} " + " ".join(f"{v:.2f}" for v in r[key]) for r in summary["rows"] if r.get(key)]
        if pairs:
            lines.append(f"{words} (tok/s), round by round: " + "; ".join(pairs))
    if AUTO_COLD in arms:
        pairs = [
            f"c={r['concurrency']} " + " ".join(f"{v:.2f}" for v in r["auto_cold_over_rival_by_round"].get(PLAIN) or [])
            for r in summary["rows"]
            if (r.get("auto_cold_over_rival_by_round") or {}).get(PLAIN)
        ]
        if pairs:
            lines.append("auto cold / plain (tok/s), round by round: " + "; ".join(pairs))
    lines.extend(f"PROBLEM: {p}" for p in summary["problems"])
    return "\n".join(lines)
