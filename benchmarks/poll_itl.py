"""Decode inter-token latency under polling: what a dashboard's ``/server_info`` costs.

    python -m benchmarks.poll_itl [--tp 2] [--requests 8] [--max-tokens 48] [--rounds 2]
                                  [--json] [--out FILE]

Starts a plain SGLang server and the patched one (the CPU rig's trained EAGLE-3 pair,
tests/real_sglang/rig, ``--tp`` ranks each; the one not measured is SIGSTOPped) and, per
server, measures three polling arms, every arm once per round, the order rotated each
round:

  none     nobody polls
  console  the console's rate: ``/server_info`` and ``/v1/loads`` once a second
  20hz     ``/server_info`` 20 times a second

Each arm streams ``--requests`` greedy requests one after another (concurrency 1) and
records, per streamed chunk, the gap since the previous chunk divided by the tokens it
carried (a speculative step carries several): the inter-token latency. Prints p50 / p99
per server and arm, and each arm over ``none`` of the same server. Every read has a size
cap and a deadline. Figures go in docs/sglang-patch.md with the load average.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

ARMS = {"none": (), "console": (("/server_info", 1.0), ("/v1/loads", 1.0)), "20hz": (("/server_info", 0.05),)}
LINE_CAP = 1 << 20
READ_DEADLINE_S = 120.0


def _signal(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except ProcessLookupError:
        pass


class Poller:
    """Threads polling ``paths`` at their periods until stopped; counts answers."""

    def __init__(self, url: str, paths) -> None:
        self.url, self.paths, self.stop_at = url, paths, threading.Event()
        self.count = 0
        self.threads = [threading.Thread(target=self._loop, args=p, daemon=True) for p in paths]

    def _loop(self, path: str, period: float) -> None:
        u = urlparse(self.url)
        while not self.stop_at.is_set():
            t0 = time.monotonic()
            try:
                conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=10)
                conn.request("GET", path)
                conn.getresponse().read(4 << 20)
                conn.close()
                self.count += 1
            except OSError:
                pass
            self.stop_at.wait(max(0.0, period - (time.monotonic() - t0)))

    def __enter__(self) -> Poller:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop_at.set()
        for t in self.threads:
            t.join(15)


def stream_itl(url: str, prompt: list[int], max_tokens: int) -> list[float]:
    """Seconds per token between streamed chunks of one greedy request."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=READ_DEADLINE_S)
    body = json.dumps(
        {
            "input_ids": prompt,
            "stream": True,
            "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0, "ignore_eos": True},
        }
    )
    conn.request("POST", "/generate", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    gaps, last_t, last_n = [], None, 0
    deadline = time.monotonic() + READ_DEADLINE_S
    while time.monotonic() < deadline:
        line = resp.readline(LINE_CAP)
        if not line:
            break
        if not line.startswith(b"data:") or line.strip() == b"data: [DONE]":
            continue
        now = time.monotonic()
        n = len(json.loads(line[5:]).get("output_ids") or [])
        if last_t is not None and n > last_n:
            gaps += [(now - last_t) / (n - last_n)] * (n - last_n)
        if n > last_n:
            last_t, last_n = now, n
    conn.close()
    return gaps


def measure(url: str, arm: str, opts: argparse.Namespace) -> dict:
    from tests.real_sglang.rig.trained_models import prompt_ids

    gaps: list[float] = []
    with Poller(url, ARMS[arm]) as poller:
        for i in range(opts.requests):
            gaps += stream_itl(url, prompt_ids(i), opts.max_tokens)
    return {"gaps": gaps, "polls": poller.count}


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tp", type=int, default=2)
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", type=Path)
    opts = p.parse_args(argv)
    from tests.real_sglang.rig.build import ensure_rig
    from tests.real_sglang.rig.pool import Spec, launch

    results: dict = {}
    servers = []
    with tempfile.TemporaryDirectory(prefix="poll-itl-") as tmp:
        rig = ensure_rig()
        try:
            for spec in (Spec("trained", patched=False, tp=opts.tp), Spec("trained", tp=opts.tp)):
                server = launch(rig, spec, Path(tmp), 7200)
                servers.append((spec, server))
                server.wait_ready(timeout_s=1200)
                _signal(server.pgid, signal.SIGSTOP)
            order = list(ARMS)
            for r in range(opts.rounds):
                for spec, server in servers:
                    _signal(server.pgid, signal.SIGCONT)
                    for arm in order[r % len(order) :] + order[: r % len(order)]:
                        got = measure(server.url, arm, opts)
                        slot = results.setdefault(spec.name, {}).setdefault(arm, {"gaps": [], "polls": 0})
                        slot["gaps"] += got["gaps"]
                        slot["polls"] += got["polls"]
                        print(f"round {r} {spec.name} {arm}: {len(got['gaps'])} tokens, {got['polls']} polls", file=sys.stderr)
                    _signal(server.pgid, signal.SIGSTOP)
        finally:
            left = []
            for _, server in servers:
                _signal(server.pgid, signal.SIGCONT)
                left += server.stop()
    summary = {"load": os.getloadavg(), "tp": opts.tp, "processes_left": left, "rows": []}
    for name, arms in results.items():
        base = pct(arms["none"]["gaps"], 50)
        for arm, slot in arms.items():
            p50, p99 = pct(slot["gaps"], 50), pct(slot["gaps"], 99)
            summary["rows"].append(
                {
                    "server": name,
                    "arm": arm,
                    "tokens": len(slot["gaps"]),
                    "polls": slot["polls"],
                    "p50_ms": p50 and round(p50 * 1e3, 2),
                    "p99_ms": p99 and round(p99 * 1e3, 2),
                    "p50_vs_none": round(p50 / base, 3) if p50 and base else None,
                }
            )
    if opts.out:
        opts.out.write_text(json.dumps(summary, indent=1))
    if opts.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"load average {summary['load']}, tp {opts.tp}")
        print("| server | polling | tokens | polls | ITL p50 ms | ITL p99 ms | p50 / none |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for row in summary["rows"]:
            print(
                f"| {row['server']} | {row['arm']} | {row['tokens']} | {row['polls']} | {row['p50_ms']} "
                f"| {row['p99_ms']} | {row['p50_vs_none']} |"
            )
    return 0 if not left else 1


if __name__ == "__main__":
    from tests.real_sglang.rig.pool import end_on_term

    end_on_term()  # kill / a closed terminal stop the servers as Ctrl-C does
    sys.exit(main())
