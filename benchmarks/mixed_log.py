"""A log of mixed SGLang versions' line shapes (issue 35 item 9's corpus).

    python -m benchmarks.mixed_log OUT [--lines 1000000]

The logs benchmark's generator (benchmarks/logs_bench.py) writes SGLang 0.5.23's default
Decode and Prefill lines only. Here every stats line draws its shape from what SGLang's
releases and options print (read from `scheduler_components/metrics_reporter.py` and
`pool_stats_observer.py` of 0.5.23, and the 2024 forms in tests/logs/samples.py):

- rank prefixes: none (tp 1), `TP0`, `DP1 TP1`, `TP2 EP2`, `DP0 TP3 EP3`, `PP1 TP0`;
  clock with or without milliseconds (`SGLANG_LOG_MS`);
- `Decode batch, ` / `Decode batch. ` (2024) / `Decode batch [N], ` (`SGLANG_LOG_FORWARD_ITERS`);
- accept figures or none, `cap len`, hybrid `#full token` / `swa` / `mamba` usage, PD decode's
  `pre-allocated usage, #prealloc-req, #transfer-req, #retracted-req`;
- a trailing `, est. decode TFLOPS/s (per GPU): .., est. read BW .., est. write BW ..`
  (`--enable-mfu-metrics`), `, fwd occupancy: ..%, fwd+idle occupancy: ..%` (the device timer),
  a trailing `, ` or none;
- 0.5.23's Prefill line (`#pending-token`, a graph flag, `input throughput`), the 2024 forms
  (`cache hit rate`, `(mixed #running-req: N)`), PD prefill's `#bootstrap-req`, `#inflight-req`.

The rest of the log (http access lines, switches, other lines, tracebacks) in the same
proportions as the generator's.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Iterator
from pathlib import Path

from benchmarks.logs_bench import write_log

RANKS = ("", " TP0", " DP1 TP1", " TP2 EP2", " DP0 TP3 EP3", " PP1 TP0")


def _decode_text(rnd: random.Random, batch: int) -> str:
    head = rnd.choice(("Decode batch, ", "Decode batch. ", f"Decode batch [{rnd.randrange(1, 10**6)}], "))
    parts = [f"#running-req: {batch}"]
    if rnd.random() < 0.25:  # hybrid models
        parts += [f"#full token: {batch * 900 + rnd.randrange(900)}", f"full token usage: {rnd.random():.2f}"]
        parts += (
            [f"#swa token: {rnd.randrange(4000)}", f"swa token usage: {rnd.random():.2f}"]
            if rnd.random() < 0.5
            else [
                f"mamba num: {rnd.randrange(64)}",
                f"mamba usage: {rnd.random():.2f}",
            ]
        )
    else:
        parts += [f"#token: {batch * 900 + rnd.randrange(900)}", f"token usage: {rnd.random():.2f}"]
    if rnd.random() < 0.7:
        parts += [f"accept len: {rnd.uniform(1.5, 3.5):.2f}", f"accept rate: {rnd.uniform(0.3, 0.8):.2f}"]
        if rnd.random() < 0.2:
            parts.append(f"cap len: {rnd.uniform(2, 4):.2f}")
    if rnd.random() < 0.2:  # PD disaggregation, decode side
        parts += [
            f"pre-allocated usage: {rnd.random():.2f}",
            f"#prealloc-req: {rnd.randrange(8)}",
            f"#transfer-req: {rnd.randrange(8)}",
            f"#retracted-req: {rnd.randrange(2)}",
        ]
    parts += [
        f"{rnd.choice(('cuda', 'cuda', 'cpu', 'npu'))} graph: {rnd.choice(('True', 'False'))}",
        f"gen throughput (token/s): {rnd.uniform(50, 900):.2f}",
        f"#queue-req: {rnd.randrange(4)}",
    ]
    if rnd.random() < 0.3:
        parts += [
            f"est. decode TFLOPS/s (per GPU): {rnd.uniform(1, 400):.2f}",
            f"est. read BW (GB/s per GPU): {rnd.uniform(100, 4000):.2f}",
            f"est. write BW (GB/s per GPU): {rnd.uniform(1, 100):.2f}",
        ]
    if rnd.random() < 0.3:
        parts += [f"fwd occupancy: {rnd.uniform(10, 100):.2f}%", f"fwd+idle occupancy: {rnd.uniform(50, 100):.2f}%"]
    return head + ", ".join(parts) + rnd.choice(("", ", "))


def _prefill_text(rnd: random.Random, batch: int) -> str:
    new, cached = rnd.randrange(1, 8192), rnd.randrange(4096)
    shape = rnd.random()
    if shape < 0.5:  # 0.5.23
        parts = [
            f"#new-seq: {rnd.randrange(1, 5)}",
            f"#new-token: {new}",
            f"#cached-token: {cached}",
            f"token usage: {rnd.random():.2f}",
            f"#running-req: {batch}",
            f"#queue-req: {rnd.randrange(4)}",
            f"#pending-token: {rnd.randrange(9000)}",
        ]
        if rnd.random() < 0.2:  # PD disaggregation, prefill side
            parts += [f"#bootstrap-req: {rnd.randrange(4)}", f"#inflight-req: {rnd.randrange(4)}", "#optimistic-req: 0"]
        parts += [f"cuda graph: {rnd.choice(('True', 'False'))}", f"input throughput (token/s): {rnd.uniform(100, 90000):.2f}"]
        if rnd.random() < 0.3:
            parts.append(f"est. prefill TFLOPS/s (per GPU): {rnd.uniform(1, 400):.2f}")
        return "Prefill batch, " + ", ".join(parts)
    if shape < 0.75:  # 2024, period form with the cache hit rate
        return (
            f"Prefill batch. #new-seq: {rnd.randrange(1, 5)}, #new-token: {new}, #cached-token: {cached}, "
            f"cache hit rate: {rnd.uniform(0, 100):.2f}%, token usage: {rnd.random():.2f}, "
            f"#running-req: {batch}, #queue-req: {rnd.randrange(4)}"
        )
    return (
        f"Prefill batch(mixed #running-req: {batch}). #new-seq: {rnd.randrange(1, 5)}, #new-token: {new}, "
        f"#cached-token: {cached}, cache hit rate: {rnd.uniform(0, 100):.2f}%, #running-req: {batch}, "
        f"#queue-req: {rnd.randrange(4)}"
    )


def generate_mixed(path: Path, n_lines: int, seed: int = 11) -> int:
    """Write ``n_lines`` lines of mixed versions' shapes; returns bytes written."""
    return write_log(path, _records(n_lines, seed))


def _records(n_lines: int, seed: int) -> Iterator[str]:
    rnd = random.Random(seed)
    t0 = 1_795_000_000
    batch, mode, i = 4, "speculative", 0
    while i < n_lines:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t0 + i // 200))
        if rnd.random() < 0.3:
            stamp += f".{rnd.randrange(1000):03d}"
        prefix = f"[{stamp}{rnd.choice(RANKS)}] "
        batch = max(1, min(64, batch + rnd.choice((-1, 0, 0, 1))))
        r = rnd.random()
        if r < 0.55:
            line = prefix + _decode_text(rnd, batch)
        elif r < 0.75:
            line = prefix + _prefill_text(rnd, batch)
        elif r < 0.95:
            line = f'{prefix}INFO:     127.0.0.1:{rnd.randrange(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        elif r < 0.97:
            new = "target_only" if mode == "speculative" else "speculative"
            why = "(decode batch 9 > threshold 5)" if new == "target_only" else "(decode batch 3 <= 4, threshold 5)"
            mode = new
            line = f"{prefix}Dynamic speculation: switched to {new.replace('_', '-')} {why}"
        elif r < 0.998:
            line = f"{prefix}Cache flushed; waiting for requests (#running-req drained), idle GPU memory 12.3 GB"
        else:
            line = (
                f"{prefix}Scheduler hit an exception: Traceback (most recent call last):\n"
                '  File "/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process\n'
                "    scheduler.event_loop_overlap()\n"
                "RuntimeError: CUDA error: an illegal memory access was encountered"
            )
            i += 3
        yield line
        i += 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--lines", type=int, default=1_000_000)
    args = p.parse_args(argv)
    size = generate_mixed(args.out, args.lines)
    print(f"{args.out}: {args.lines} lines, {size / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
