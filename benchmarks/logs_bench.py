"""Benchmark: parse + store throughput of the log pipeline, against grep on the same file.

    python -m benchmarks.logs_bench [--lines 1000000] [--keep FILE] [--json]

Generates a realistic SGLang log (TP decode/prefill stat lines, uvicorn access lines,
speculation switches, warnings, a traceback now and then) in a temporary directory, then
measures, in this one run:
  * parse+store lines/s: ``iter_file`` (read, decode, clean, classify, group tracebacks)
    into a ``LogStore`` of 100k records;
  * ``grep -c 'Decode batch'`` lines/s on the same file (the file is read once before, so
    both run from the page cache);
  * the whole process's peak RSS with the store full (100k records).
Goals (issue 3): >= 500k lines/s, >= 1/20 of grep, RSS < 200 MB. Wall-clock rates are
what the goals are about; CPU seconds are printed too, since a loaded machine stretches
wall time but not CPU time.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from itertools import islice
from pathlib import Path

from server_control.logs import LogStore, iter_file

GOAL_LINES_PER_S = 500_000
GOAL_GREP_RATIO = 1 / 20
GOAL_RSS_MB = 200


def write_log(path: Path, lines: Iterable[str]) -> int:
    """Write ``lines`` (a record may hold several lines), 10,000 at a time; returns bytes."""
    size = 0
    it = iter(lines)
    with open(path, "w", encoding="utf-8") as f:
        while chunk := list(islice(it, 10_000)):
            text = "\n".join(chunk) + "\n"
            size += len(text)
            f.write(text)
    return size


def generate(path: Path, n_lines: int, seed: int = 7) -> int:
    """Write ``n_lines`` lines of a TP2 EAGLE-3 server under wave traffic; returns bytes."""
    return write_log(path, _records(n_lines, seed))


def _records(n_lines: int, seed: int) -> Iterator[str]:
    rnd = random.Random(seed)
    t0 = 1_795_000_000
    mode = "speculative"
    batch = 4
    i = 0
    while i < n_lines:
        second = t0 + i // 200
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(second))
        batch = max(1, min(64, batch + rnd.choice((-1, 0, 0, 1))))
        r = rnd.random()
        if r < 0.55:
            accept = (
                ""
                if mode == "target_only"
                else (f"accept len: {rnd.uniform(1.5, 3.5):.2f}, accept rate: {rnd.uniform(0.3, 0.8):.2f}, ")
            )
            line = (
                f"[{stamp} TP0] Decode batch, #running-req: {batch}, #token: {batch * 900 + rnd.randrange(900)}, "
                f"token usage: {rnd.random():.2f}, {accept}cuda graph: True, "
                f"gen throughput (token/s): {rnd.uniform(50, 900):.2f}, #queue-req: {rnd.randrange(4)}, "
            )
        elif r < 0.75:
            line = (
                f"[{stamp} TP0] Prefill batch, #new-seq: {rnd.randrange(1, 5)}, #new-token: {rnd.randrange(1, 8192)}, "
                f"#cached-token: {rnd.randrange(4096)}, token usage: {rnd.random():.2f}, "
                f"#running-req: {batch}, #queue-req: {rnd.randrange(4)}, "
            )
        elif r < 0.95:
            line = f'[{stamp}] INFO:     127.0.0.1:{rnd.randrange(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
        elif r < 0.97:
            new = "target_only" if mode == "speculative" else "speculative"
            why = "(decode batch 9 > threshold 5)" if new == "target_only" else "(decode batch 3 <= 4, threshold 5)"
            mode = new
            line = f"[{stamp} TP{rnd.randrange(2)}] Dynamic speculation: switched to {new.replace('_', '-')} {why}"
        elif r < 0.99:
            line = f"[{stamp} TP1] Cache flushed; waiting for requests (#running-req drained), idle GPU memory 12.3 GB"
        elif r < 0.998:
            line = (
                "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml "
                "package is deprecated. Please install nvidia-ml-py instead."
            )
        else:
            line = (
                f"[{stamp} TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
                f'  File "/sglang/srt/managers/scheduler.py", line 2712, in run_scheduler_process\n'
                f"    scheduler.event_loop_overlap()\n"
                f"RuntimeError: CUDA error: an illegal memory access was encountered"
            )
            i += 3
        yield line
        i += 1


def rss_mb() -> float:
    """Current RSS (Linux /proc), else the peak."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def count_lines(path: Path) -> int:
    """Newlines in the file, read in chunks (also warms the page cache)."""
    n = 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            n += chunk.count(b"\n")
    return n


def bench(path: Path) -> dict:
    n_file_lines = count_lines(path)
    store = LogStore()
    t, cpu = time.perf_counter(), time.process_time()
    for columns in iter_file(path):
        store.extend_columns(*columns)
    parse_s = time.perf_counter() - t
    parse_cpu_s = time.process_time() - cpu
    rss = rss_mb()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    grep = shutil.which("grep")
    grep_s = grep_count = grep_cpu_s = None
    if grep:
        t = time.perf_counter()
        proc = subprocess.run([grep, "-c", "Decode batch", str(path)], capture_output=True, text=True)
        grep_s = time.perf_counter() - t
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        grep_cpu_s = usage.ru_utime + usage.ru_stime
        grep_count = int(proc.stdout.strip() or 0)
    decode = sum(1 for r in store.records() if r.kind == "decode")
    rate = n_file_lines / parse_s
    grep_rate = n_file_lines / grep_s if grep_s else None
    return {
        "lines": n_file_lines,
        "bytes": path.stat().st_size,
        "records": store.total,
        "stored": len(store),
        "dropped": store.dropped,
        "parse_store_s": round(parse_s, 3),
        "lines_per_s": round(rate),
        "parse_store_cpu_s": round(parse_cpu_s, 3),
        "lines_per_cpu_s": round(n_file_lines / parse_cpu_s) if parse_cpu_s else None,
        "grep_s": round(grep_s, 3) if grep_s else None,
        "grep_count": grep_count,
        "grep_lines_per_s": round(grep_rate) if grep_rate else None,
        "grep_cpu_s": round(grep_cpu_s, 3) if grep_cpu_s is not None else None,
        "ratio_to_grep": round(rate / grep_rate, 4) if grep_rate else None,
        "rss_mb_store_full": round(rss, 1),
        "peak_rss_mb": round(peak, 1),
        "decode_in_last_100k": decode,
        "goal_lines_per_s": rate >= GOAL_LINES_PER_S,
        "goal_grep_ratio": bool(grep_rate) and rate / (grep_rate or 1.0) >= GOAL_GREP_RATIO,
        "goal_rss": peak < GOAL_RSS_MB,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="also copy the generated log here")
    parser.add_argument("--file", type=Path, help="benchmark this existing log instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="logs-bench-") as tmp:
        path = args.file or Path(tmp) / "server.log"
        if not args.file:
            generate(path, args.lines)
            if args.keep:
                shutil.copyfile(path, args.keep)
        count_lines(path)  # warm the page cache for both contenders
        result = bench(path)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>22}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
