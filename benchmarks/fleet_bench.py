"""Fleet benchmark: prints figures (record them in docs/fleet.md and the README).

    python -m benchmarks.fleet_bench [--members 32] [--seconds 30] [--kind url|local]

N simulated replicas (`--sim-light`, one process each, TP 1, wave traffic crossing the
threshold, time scale 1), one fleet file with them, and the real fleet console
(`specconsole fleet --fleet F`) in a real pseudo-terminal (200x60, xterm-256color; the
PtyConsole of console_bench), polling every member at 1 Hz:
  1. cpu: CPU of the console process over --seconds, after a warm-up;
  2. key-to-screen: `o` (sort by the next column) pressed 12 times; time until the header
     shows the new sort column;
  3. threshold: `=` N `enter` on the fleet screen: time from `enter` until the results panel
     shows the answers of all members (each change read back on every DP rank), 5 times;
     and the same through the API (``Fleet.act("threshold", n)``) in this process, 10 times.
`--kind url` attaches the members by URL with their log files (what a fleet of other hosts
costs: HTTP and logs); `--kind local` makes them local profiles the console supervises.
Goals: console CPU < 10 % of one core, key-to-screen < 100 ms, fleet-wide threshold < 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks.console_bench import PtyConsole
from server_control.proc.sim_launcher import start_sim

SORT_CYCLE = (
    "host",
    "state",
    "mode",
    "threshold",
    "batch",
    "tok_s",
    "accept_len",
    "marks",
    "restarts",
    "gpu_util",
    "name",
    "host",
)


def _fleet_file(tmp: Path, sims, kind: str) -> Path:
    lines = ['name = "bench"', "poll_interval_s = 1.0", ""]
    for i, sim in enumerate(sims):
        lines.append(f"[members.m{i:02d}]")
        if kind == "url":
            lines += [f'url = "{sim.url}"', f'log = "{sim.log_path}"', ""]
        else:
            prof = tmp / f"m{i:02d}.toml"
            prof.write_text(
                f'name = "m{i:02d}"\n[server]\nkind = "sim"\nport = {sim.port}\n'
                '[dynamic]\nthreshold = 5\n[sim]\nlight = true\ntraffic = "wave:10:60"\n'
                "max_lifetime = 600\n"
            )
            lines += [f'profile = "{prof}"', ""]
    path = tmp / "bench.toml"
    path.write_text("\n".join(lines))
    return path


async def _api_threshold(fleet_path: Path, rounds: int) -> dict:
    from server_control.fleet.fleet import Fleet
    from server_control.fleet.spec import load_fleet

    fleet = Fleet(load_fleet(fleet_path), supervise=False)
    await fleet.start()
    times = []
    try:
        await fleet.settle()
        for i in range(rounds):
            t0 = time.perf_counter()
            results = await fleet.act("threshold", 6 + i % 3)
            times.append(time.perf_counter() - t0)
            bad = [r for r in results if r.outcome != "ok"]
            if bad:
                return {"error": f"{len(bad)} members: {bad[0].detail}"}
    finally:
        await fleet.close()
    return {"median_ms": round(1000 * statistics.median(times)), "max_ms": round(1000 * max(times))}


def bench(members: int, seconds: float, kind: str, tmp: Path, traffic: str = "wave:10:60") -> dict:
    sims = []
    con = None
    out: dict = {"members": members, "kind": kind, "traffic": traffic}
    try:
        if kind == "url":
            sims = [
                start_sim(
                    "--sim-light",
                    tp=1,
                    threshold=5,
                    traffic=traffic,
                    time_scale=1.0,
                    lifetime=seconds + 300,
                    seed=i,
                    log_path=tmp / f"sim-{i}.log",
                )
                for i in range(members)
            ]
            for sim in sims:
                sim.wait_ready(120)
        else:  # ports only: the console launches them (`L`)
            sims = [type("P", (), {"port": start_port, "url": ""})() for start_port in _ports(members)]
        fleet_path = _fleet_file(tmp, sims, kind)
        con = PtyConsole(
            [
                sys.executable,
                "-m",
                "console",
                "fleet",
                "--fleet",
                str(fleet_path),
                "--no-mouse",
                "--state-dir",
                str(tmp / "state"),
            ]
        )
        if not con.wait_for(f"fleet bench: {members} members", 60):
            return {"error": "the fleet screen did not show"}
        if kind == "local":
            con.expect_after_key(b"L", f"{members} ok", 180)
        time.sleep(8.0)  # warm-up: first polls of every member, logs read
        proc = psutil.Process(con.proc.pid)
        c0, b0, t0 = proc.cpu_times(), con.bytes, time.perf_counter()
        time.sleep(seconds)
        c1, b1, t1 = proc.cpu_times(), con.bytes, time.perf_counter()
        out["cpu_percent_of_one_core"] = round(100 * (c1.user + c1.system - c0.user - c0.system) / (t1 - t0), 2)
        out["terminal_bytes_per_s"] = round((b1 - b0) / (t1 - t0))
        keys = [con.expect_after_key(b"o", f"sort {col}^", 5.0) for col in SORT_CYCLE]
        got = [k for k in keys if k is not None]
        out["key_to_screen_ms"] = {
            "median": round(1000 * statistics.median(got), 1) if got else None,
            "max": round(1000 * max(got), 1) if got else None,
            "missed": len(keys) - len(got),
        }
        times, sent = [], []
        for i in range(5):
            n = 7 + i  # a new value each round: the marker cannot be an old result redrawn
            con.expect_after_key(b"=", "Set N", 5.0)
            con.expect_after_key(str(n).encode(), str(n), 5.0)
            t0 = time.perf_counter()
            ds = con.expect_after_key(b"\r", "sent to", 10.0)  # the prompt closed, the action began
            if ds is not None and con.wait_for(f"threshold {n} on {members}: ", 10.0):
                times.append(time.perf_counter() - t0)
                sent.append(ds)
            time.sleep(1.0)
        out["enter_to_sent_ms"] = round(1000 * statistics.median(sent)) if sent else None
        out["threshold_on_screen_ms"] = {
            "median": round(1000 * statistics.median(times)) if times else None,
            "max": round(1000 * max(times)) if times else None,
            "missed": 5 - len(times),
        }
        con.close()
        con = None
        out["threshold_api_ms"] = asyncio.run(_api_threshold(fleet_path, 10))
        if kind == "local":
            from server_control.fleet.fleet import Fleet
            from server_control.fleet.spec import load_fleet

            async def stop():
                fleet = Fleet(load_fleet(fleet_path), tmp / "state", supervise=False)
                await fleet.start()
                await fleet.act("stop")
                await fleet.close()

            asyncio.run(stop())
    finally:
        if con is not None:
            con.close()
        for sim in sims:
            if hasattr(sim, "stop"):
                sim.stop(grace=10)
    return out


def _ports(n: int) -> list[int]:
    from server_control.host.ports import free_port

    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.fleet_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--members", type=int, default=32)
    p.add_argument("--seconds", type=float, default=30.0, help="CPU measuring window")
    p.add_argument("--kind", choices=("url", "local"), default="url")
    p.add_argument("--traffic", default="wave:10:60", help="each simulator's built-in traffic")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="specconsole-fleet-bench-") as d:
        print(json.dumps(bench(args.members, args.seconds, args.kind, Path(d), args.traffic)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
