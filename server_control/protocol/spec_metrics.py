"""The dynamic speculation metrics on ``/metrics``, in SGLang's ``sglang:`` style.

One definition for the SGLang patch (each scheduler rank, through SGLang's prometheus
multiprocess registry, labelled like SGLang's own scheduler metrics) and the simulator
(its own registry). Values come from ``SpecSwitch.snapshot()`` (+ ``"active"``), so both
report the same thing. Standard library only at import: the prometheus classes are
passed in by the caller.

Gauges: threshold, hysteresis, dwell, forced mode (0 auto, 1 speculative, 2 target_only),
the cold-draft mark, current mode (0 speculative, 1 target-only), active, last decode batch, and the accept
length over the verify steps that drafted (SGLang's own ``sglang:spec_accept_rate`` and
``spec_accept_length`` follow the current draft count and read 0 / 1 while target-only).
Counters: switches by the mode switched to, decode steps and generated tokens by mode,
the verifies / accepted / proposed drafts of the steps that drafted, the target-only steps
that ran with the draft cold, and (the patch only)
decode steps whose target forward and whose draft-extend replayed a CUDA graph or ran
eager, by mode. Gauge ``state_memory_bytes``: what the steps=0 state took on the rank.
Cost curves (``server_control.protocol.cost_curves``): per mode and decode-batch bucket (label
``batch``: the bucket's largest batch, ``+Inf`` for the last), timed decode steps, their
seconds, and the tokens committed, so ``rate(seconds)/rate(steps)`` per bucket is the
step time and ``rate(tokens)/rate(seconds)`` the tok/s curve of each mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from server_control.protocol import decision

PREFIX = "sglang:spec_disable_"

GAUGES: tuple[tuple[str, str, Callable[[dict[str, Any]], Any]], ...] = (
    (
        "batch_threshold",
        "Dynamic speculation: speculate while the decode batch <= N, target-only above (0 = never disable).",
        lambda s: s["threshold"],
    ),
    ("hysteresis", "Dynamic speculation: back to speculative at batch <= max(1, N - H).", lambda s: s["hysteresis"]),
    ("min_dwell_steps", "Dynamic speculation: decode steps in a mode before the next switch.", lambda s: s["min_dwell_steps"]),
    (
        "force_mode",
        "Dynamic speculation forced mode: 0 auto, 1 speculative, 2 target_only.",
        lambda s: decision.FORCE_CHOICES.index(s["force"]),
    ),
    (
        "cold_draft_above",
        "Dynamic speculation: target-only steps of a decode batch > M skip the draft's extend (0 = warm at every batch).",
        lambda s: s.get("cold_draft_above", 0),
    ),
    ("mode", "Dynamic speculation current mode: 0 speculative, 1 target-only.", lambda s: decision.MODES.index(s["mode"])),
    ("active", "1 when dynamic speculation disable is active on this rank.", lambda s: int(bool(s.get("active", True)))),
    ("last_decode_batch", "Decode batch size of the last decode step the switch saw.", lambda s: s["last_batch"]),
    (
        "accept_length",
        "Mean tokens per request per verify over the verify steps that drafted (target-only steps excluded); 0 until one has.",
        lambda s: 1 + s["accepted_drafts"] / s["verifies"] if s.get("verifies") else 0.0,
    ),
    (
        "state_memory_bytes",
        "Memory the target-only (steps=0) state took on this rank at "
        "start-up (device memory; host memory on a CPU server); 0 until built.",
        lambda s: int(((s.get("state_memory") or {}).get("used_gib") or 0) * 1024**3),
    ),
)

FORWARD_PARTS = ("target_graph", "target_eager", "draft_extend_graph", "draft_extend_eager")


def _forwards(part: str) -> Callable[[dict[str, Any]], Any]:
    """Decode forwards by mode of one part (``snapshot["forwards"][mode][part]``)."""
    return lambda s: {m: int(((s.get("forwards") or {}).get(m) or {}).get(part, 0)) for m in decision.MODES}


# (name, documentation, label, value): label None = one series; else one per mode.
COUNTERS: tuple[tuple[str, str, str | None, Callable[[dict[str, Any]], Any]], ...] = (
    ("switches", "Dynamic speculation mode switches, by the mode switched to.", "to", lambda s: s["switches"]),
    ("decode_steps", "Decode steps, by dynamic speculation mode.", "mode", lambda s: s["steps"]),
    ("generated_tokens", "Tokens committed by decode steps, by dynamic speculation mode.", "mode", lambda s: s["tokens"]),
    ("spec_verifies", "Request verifies of decode steps that drafted.", None, lambda s: s["verifies"]),
    ("accepted_drafts", "Draft tokens accepted in decode steps that drafted.", None, lambda s: s["accepted_drafts"]),
    ("proposed_drafts", "Draft tokens proposed in decode steps that drafted.", None, lambda s: s["proposed_drafts"]),
    (
        "cold_steps",
        "Target-only decode steps that skipped the draft's extend (batch above cold_draft_above).",
        None,
        lambda s: s.get("cold_steps", 0),
    ),
    (
        "target_graph_forwards",
        "Decode steps whose target forward replayed a CUDA graph, by mode.",
        "mode",
        _forwards("target_graph"),
    ),
    ("target_eager_forwards", "Decode steps whose target forward ran eager, by mode.", "mode", _forwards("target_eager")),
    (
        "draft_extend_graph_forwards",
        "Decode steps whose draft-extend replayed a CUDA graph, by mode.",
        "mode",
        _forwards("draft_extend_graph"),
    ),
    (
        "draft_extend_eager_forwards",
        "Decode steps whose draft-extend ran eager, by mode.",
        "mode",
        _forwards("draft_extend_eager"),
    ),
)

# (name, documentation, index into a cost_curves row)
BUCKET_COUNTERS: tuple[tuple[str, str, int], ...] = (
    ("bucket_steps", "Timed decode steps, by mode and decode batch bucket (le: largest batch).", 2),
    ("bucket_seconds", "Seconds of timed decode steps, by mode and decode batch bucket.", 3),
    ("bucket_tokens", "Tokens committed by decode steps, by mode and decode batch bucket.", 7),
)

NAMES = (
    tuple(PREFIX + g[0] for g in GAUGES)
    + tuple(PREFIX + c[0] + "_total" for c in COUNTERS)
    + tuple(PREFIX + b[0] + "_total" for b in BUCKET_COUNTERS)
)
# counted by the SGLang patch only (the simulator runs no graphs)
PATCH_ONLY = tuple(PREFIX + part + "_forwards_total" for part in FORWARD_PARTS)


class SpecMetrics:
    """The metric objects for one label set; ``publish(snapshot)`` sets the gauges and
    advances the counters by what the snapshot's cumulative values gained."""

    def __init__(
        self, gauge_cls: Any, counter_cls: Any, labels: dict[str, Any], *, registry: Any = None, multiprocess: bool = False
    ) -> None:
        self.labels = {k: str(v) for k, v in labels.items()}
        names = list(self.labels)
        extra = {"registry": registry} if registry is not None else {}
        gauge_extra = dict(extra, multiprocess_mode="mostrecent") if multiprocess else extra
        self.gauges = [(gauge_cls(PREFIX + key, doc, names, **gauge_extra), value) for key, doc, value in GAUGES]
        self.counters = [
            (counter_cls(PREFIX + key + "_total", doc, names + ([label] if label else []), **extra), label, value)
            for key, doc, label, value in COUNTERS
        ]
        self.buckets = [
            (counter_cls(PREFIX + key + "_total", doc, names + ["mode", "batch"], **extra), index)
            for key, doc, index in BUCKET_COUNTERS
        ]
        self._sent: dict[tuple[Any, Any], Any] = {}

    def publish(self, snapshot: dict[str, Any] | None) -> None:
        if not snapshot or "threshold" not in snapshot:
            return
        for gauge, value in self.gauges:
            gauge.labels(**self.labels).set(value(snapshot))
        for counter, label, value in self.counters:
            got = value(snapshot)
            items = got.items() if label else [(None, got)]
            for mode, total in items:
                key = (counter, mode)
                gain = total - self._sent.get(key, 0)
                if gain > 0:
                    series = dict(self.labels, **({label: mode} if label else {}))
                    counter.labels(**series).inc(gain)
                    self._sent[key] = total
        curves = snapshot.get("cost_curves")
        if isinstance(curves, dict) and isinstance(curves.get("modes"), dict):
            self._publish_buckets(curves["modes"])

    def _publish_buckets(self, modes: dict[str, Any]) -> None:
        for mode, rows in modes.items():
            for row in rows:
                batch = str(row[1]) if row[1] else "+Inf"
                for counter, index in self.buckets:
                    key = (counter, (mode, batch))
                    gain = row[index] - self._sent.get(key, 0)
                    if gain > 0:
                        counter.labels(**dict(self.labels, mode=mode, batch=batch)).inc(gain)
                        self._sent[key] = row[index]


def read_totals(text: str) -> dict[str, Any] | None:
    """The counters of a ``/metrics`` exposition (TP0 of each DP group: the rank SGLang
    publishes at its own cadence), summed over DP groups: ``{"decode_steps": {mode: n},
    "generated_tokens": {...}, "switches": {to: n}, "spec_verifies": n, "accepted_drafts":
    n, "proposed_drafts": n}``; None when the server publishes none of them."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = {PREFIX + key + "_total": (key, label) for key, _doc, label, _value in COUNTERS}
    totals: dict[str, Any] = {}
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                spec = wanted.get(s.name)
                if spec is None or s.labels.get("tp_rank", "0") != "0":
                    continue
                key, label = spec
                if label:
                    slot = totals.setdefault(key, {})
                    slot[s.labels.get(label)] = slot.get(s.labels.get(label), 0) + s.value
                else:
                    totals[key] = totals.get(key, 0) + s.value
    except Exception:  # noqa: BLE001 - garbage exposition: nothing read
        return None
    return totals or None


def window(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the server did between two ``read_totals``: decode steps per mode, the share
    of them target-only, switches, and the accept length over the steps that drafted."""
    if not before or not after:
        return None

    def gain(key: str, sub: str | None = None) -> float:
        a, b = after.get(key, {} if sub else 0), before.get(key, {} if sub else 0)
        return float((a.get(sub, 0) - b.get(sub, 0)) if sub else a - b)

    steps = {m: gain("decode_steps", m) for m in decision.MODES}
    total = sum(steps.values())
    verifies = gain("spec_verifies")
    return {
        "decode_steps": steps,
        "target_only_share": steps[decision.TARGET_ONLY] / total if total else None,
        "switches": sum(gain("switches", m) for m in decision.MODES),
        "accept_length": 1 + gain("accepted_drafts") / verifies if verifies else None,
    }
