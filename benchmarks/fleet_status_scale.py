"""`fleet status --json` on a large fleet: wall time and the process's peak memory.

    python -m benchmarks.fleet_status_scale [--members 1000] [--rounds 3]

Writes a fleet file of ``--members`` URL members on loopback ports nothing listens on
(each answers "connection refused" at once: what is measured is the command's own cost per
member, not a network), runs `specconsole fleet status --fleet F --json` in a child
``--rounds`` times, and prints each round's wall time and the child's peak RSS
(``ru_maxrss`` of the waited child). Goal (issue 37): 1000 members within 10 s and 300 MB.
Figures go in docs/fleet.md with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from server_control.host.ports import free_port


def fleet_file(path: Path, members: int) -> None:
    lines = [f'name = "scale{members}"', ""]
    for i in range(members):
        lines += [f"[members.m{i:04d}]", f'url = "http://127.0.0.1:{free_port()}"', ""]
    path.write_text("\n".join(lines))


def one_round(fleet: Path, state: Path) -> dict:
    env = {**os.environ, "SPECCONSOLE_STATE_DIR": str(state)}
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: the command, its output discarded
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.execvpe(sys.executable, [sys.executable, "-m", "console", "fleet", "status", "--fleet", str(fleet), "--json"], env)
    _pid, status, usage = os.wait4(pid, 0)
    return {
        "wall_s": round(time.monotonic() - t0, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "exit": os.waitstatus_to_exitcode(status),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.fleet_status_scale", description=__doc__)
    p.add_argument("--members", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    if opts.members < 1 or opts.rounds < 1:
        p.error("want --members and --rounds >= 1")
    with tempfile.TemporaryDirectory(prefix="fleet-scale-") as tmp:
        fleet = Path(tmp) / "scale.toml"
        fleet_file(fleet, opts.members)
        load = os.getloadavg()
        rounds = [one_round(fleet, Path(tmp) / "state") for _ in range(opts.rounds)]
    out = {"members": opts.members, "load_start": load, "load_end": os.getloadavg(), "rounds": rounds}
    if opts.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{opts.members} members, load {load[0]:.2f} -> {out['load_end'][0]:.2f}")
        for r in rounds:
            print(f"  wall {r['wall_s']} s, peak RSS {r['peak_rss_mb']} MB, CPU {r['cpu_s']} s, exit {r['exit']}")
    return 0 if all(r["exit"] in (0, 1) for r in rounds) else 1


if __name__ == "__main__":
    sys.exit(main())
