"""`specconsole logs FILE --parse --json` against grep on the same file (issue 23 item 8).

    python -m benchmarks.logs_json_bench [--lines 1000000] [--rounds 3] [--file LOG] [--corpus mixed]

Generates the logs benchmark's TP2 EAGLE-3 log (benchmarks/logs_bench.py), or with
`--corpus mixed` a log of mixed SGLang versions' line shapes (benchmarks/mixed_log.py), unless
--file is given, then runs, round by round and interleaved (a shared machine's drift hits every arm
alike): `grep -c 'Decode batch'`, `specconsole logs --parse --json` (most lines written by the C
writer, server_control/logs/native_json.c), the same by the Python fast groups alone (one
finditer and a template per shape: server_control/logs/json_lines.py;
`SPECCONSOLE_JSON=python`), the same every
line by a Record and msgspec (`SPECCONSOLE_JSON=records`), the same with the
standard library's JSON encoder (`SPECCONSOLE_JSON=std`), and `--kind decode`; stdout
goes to /dev/null. Prints wall and CPU seconds (the child's user + system) per arm and the
ratio to grep, per round and the median.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.logs_bench import generate
from benchmarks.mixed_log import generate_mixed

ARMS = {
    "grep -c": lambda f: ["grep", "-c", "Decode batch", str(f)],
    "grep > file": lambda f: ["grep", "Decode batch", str(f)],
    "logs --parse --json": lambda f: [sys.executable, "-m", "console", "logs", str(f), "--parse", "--json"],
    "... (Python way)": lambda f: [sys.executable, "-m", "console", "logs", str(f), "--parse", "--json"],
    "... (Record way)": lambda f: [sys.executable, "-m", "console", "logs", str(f), "--parse", "--json"],
    "... (stdlib json)": lambda f: [sys.executable, "-m", "console", "logs", str(f), "--parse", "--json"],
    "logs --kind decode": lambda f: [sys.executable, "-m", "console", "logs", str(f), "--kind", "decode"],
}


def run_arm(name: str, argv: list[str], sink: Path) -> tuple[float, float]:
    """The arm's wall and CPU seconds. stdout to /dev/null, except grep's lines, which go to a
    file: GNU grep stops at the first match when its output is /dev/null."""
    env = dict(os.environ)
    if "stdlib" in name:
        env["SPECCONSOLE_JSON"] = "std"
    elif "Record way" in name:
        env["SPECCONSOLE_JSON"] = "records"
    elif "Python way" in name:
        env["SPECCONSOLE_JSON"] = "python"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(sink if name == "grep > file" else os.devnull, "wb") as out:
        subprocess.run(argv, stdout=out, check=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--file", type=Path)
    p.add_argument("--corpus", choices=("generator", "mixed"), default="generator", help="the log to generate")
    p.add_argument("--skip", action="append", default=[], help="leave out the arms whose name contains this")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.file or Path(tmp) / "bench.log"
        if args.file is None:
            (generate_mixed if args.corpus == "mixed" else generate)(path, args.lines)
        lines = sum(1 for _ in open(path, "rb"))
        print(f"{path}: {lines} lines, {path.stat().st_size / 1e6:.0f} MB; load average {os.getloadavg()}")
        arms = {a: m for a, m in ARMS.items() if not any(s in a for s in args.skip)}
        got: dict[str, list[tuple[float, float]]] = {a: [] for a in arms}
        for r in range(args.rounds):
            for name, make in arms.items():
                got[name].append(run_arm(name, make(path), Path(tmp) / "grep.out"))
            print(
                f"round {r + 1}: "
                + "  ".join(f"{n} {w:.2f}s/{c:.2f}cpu" for n, ((w, c),) in ((n, v[-1:]) for n, v in got.items())),
                flush=True,
            )
        med = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for n, v in got.items()}
        for name, (wall, cpu) in med.items():
            ratio = "".join(
                f"  1/{wall / gw:.0f} of {g} (wall), 1/{cpu / max(gc, 1e-3):.0f} (cpu)"
                for g, (gw, gc) in med.items()
                if g.startswith("grep") and not name.startswith("grep")
            )
            print(f"{name:22s} wall {wall:6.2f} s ({lines / wall / 1e3:7.0f}k lines/s)  cpu {cpu:6.3f} s{ratio}")
        print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
