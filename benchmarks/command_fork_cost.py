"""What a `specconsole` command run by the tests costs, forked from the fork server
(tests/support/command_forkserver.py) against exec'd as ``python -m console``.

    python -m benchmarks.command_fork_cost [--rounds 5] [--calls 10] [--json]

Each round runs every kind of command ``--calls`` times each way, the two ways interleaved
(which goes first alternates round by round), and reads the machine's busy CPU from
/proc/stat around each batch (user, nice, system, irq, softirq: the commands' processes
and the fork server's, wherever they ran). The fork server's own count of the commands it
forked is checked against what each batch claims. Printed per kind: CPU-s and wall
seconds a command, the median of the rounds, and forked / exec'd. Figures go in
docs/cpu-rig.md ("Commands forked from a fork server") with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from server_control.host.ports import free_port
from tests.support import command_forkserver as forkserver

ROOT = Path(__file__).resolve().parents[1]


def busy_s() -> float:
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def kinds(state: Path) -> dict[str, list[str]]:
    closed = f"http://127.0.0.1:{free_port()}"
    return {
        "status --json (nothing running)": ["status", "--demo", "--json", "--state-dir", str(state)],
        "threshold 7 (no server answers)": ["threshold", "7", "--url", closed],
        "logs FILE -n 3": ["logs", str(ROOT / "tests" / "logs" / "fixtures" / "server.log"), "-n", "3"],
        "--help": ["--help"],
    }


def batch(way: str, args: list[str], calls: int, env: dict[str, str]) -> tuple[float, float]:
    """CPU-s and wall seconds a command, ``calls`` commands run ``way``."""
    server = forkserver._get_server()
    assert server is not None, "the fork server did not start"
    before_forked, cpu0, t0 = server.forked, busy_s(), time.monotonic()
    for _ in range(calls):
        if way == "forked":
            forkserver.run(args, env=env, timeout=60)
        else:
            forkserver.exec_run(args, env=env, timeout=60)
    cpu, wall = busy_s() - cpu0, time.monotonic() - t0
    forked = server.forked - before_forked
    assert forked == (calls if way == "forked" else 0), (way, forked)  # each batch ran what it claims
    return cpu / calls, wall / calls


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=positive, default=5)
    ap.add_argument("--calls", type=positive, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPECCONSOLE_TEST_CLI", None)
    os.environ.pop("SPECCONSOLE_TEST_CLI", None)
    assert forkserver.why_execd(env) is None, forkserver.why_execd(env)
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        todo = kinds(Path(tmp))
        forkserver.run(["--help"], env=env, timeout=60)  # the server started, outside the windows
        got: dict[str, dict[str, list[tuple[float, float]]]] = {k: {"forked": [], "exec'd": []} for k in todo}
        for r in range(a.rounds):
            for kind, args in todo.items():
                for way in ("forked", "exec'd") if r % 2 == 0 else ("exec'd", "forked"):
                    got[kind][way].append(batch(way, args, a.calls, env))
    load1 = os.getloadavg()
    rows = []
    for kind, ways in got.items():
        f_cpu = statistics.median(c for c, _ in ways["forked"])
        e_cpu = statistics.median(c for c, _ in ways["exec'd"])
        f_wall = statistics.median(w for _, w in ways["forked"])
        e_wall = statistics.median(w for _, w in ways["exec'd"])
        rows.append(
            {
                "kind": kind,
                "forked_cpu_s": f_cpu,
                "execd_cpu_s": e_cpu,
                "forked_wall_s": f_wall,
                "execd_wall_s": e_wall,
                "cpu_ratio": f_cpu / e_cpu if e_cpu else None,
            }
        )
    out = {"rounds": a.rounds, "calls": a.calls, "load_before": load0, "load_after": load1, "rows": rows}
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{a.rounds} rounds x {a.calls} calls a way, load {load0[0]:.2f} -> {load1[0]:.2f}")
    print(f"{'command':36} {'forked CPU-s':>12} {'exec CPU-s':>11} {'ratio':>6} {'forked wall':>12} {'exec wall':>10}")
    for row in rows:
        print(
            f"{row['kind']:36} {row['forked_cpu_s']:12.3f} {row['execd_cpu_s']:11.3f} {row['cpu_ratio']:6.2f}"
            f" {row['forked_wall_s']:12.3f} {row['execd_wall_s']:10.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
