"""The terminal goes away, again and again (issue 34's acceptance): N cycles of the
single-server demo console in real tmux, N set at runtime, then `tmux kill-session`; each
cycle measures how long the console takes to end after the hang-up, checks that the run
still has its own detached supervisor (role `run`, started with it), then `kill -9`s the
server and checks that supervisor restarts it with the runtime N re-applied. ``--stuck`` runs the console under
tests/support/stuck_terminal.py (Textual's writes block on the dead terminal: the field's
hang, every time); ``--end kill9`` ends the console with `kill -9` instead of the hang-up
(nothing of the console runs after it: the run's supervisor never depended on it). Prints
one line per cycle and a summary (JSON with --json).

    python -m benchmarks.hangup_cycles [--cycles 20] [--stuck] [--end hangup|kill9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

from server_control.state import runs
from tests.real_sglang.rig.pool import end_on_term
from tests.support.tmux import REPO, Term

RUNTIME_N = 7  # set from the console before the hang-up; the demo starts at 5


def _wait(cond, timeout: float):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    return None


def cycle(root: Path, i: int, stuck: bool, end: str = "hangup") -> dict:
    t = Term(root / f"c{i}")
    t.sock = f"specconsole-hupbench-{os.getpid()}-{i}"
    entry = str(REPO / "tests/support/stuck_terminal.py") if stuck else "-m console"
    t.start(f"exec {sys.executable} {entry} demo --time-scale 5 --no-mouse")
    out: dict = {"cycle": i}
    try:
        t.wait(lambda s: "READY" in s and "N=5" in s, what="READY")
        for n in range(6, RUNTIME_N + 1):  # `+`: N+1, read back on every rank
            t.keys("+")
            t.wait(lambda s, n=n: f"N={n}" in s, what=f"N={n}", timeout=20)
        pane = t.tmux("display-message", "-p", "-t", "t", "#{pane_pid}", capture_output=True, text=True).stdout
        console = psutil.Process(int(pane))
        if end == "kill9":
            console.kill()
        else:
            t.tmux("kill-session", "-t", "t", check=True)
        hung_up = time.monotonic()
        gone = _wait(lambda: _ended(console), 30)  # a zombie has ended: only its reaping (by init) is left
        out["exit_s"] = round(time.monotonic() - hung_up, 2) if gone else None  # None: still there after 30 s
        if not gone:
            console.kill()
        state = t.state / "demo"
        rec = _wait(lambda: (r := runs.load_record("demo", state)) and (r.supervisor or {}).get("kind") == "run" and r, 20)
        out["supervised"] = bool(rec)
        if rec:
            os.killpg(rec.pgid, signal.SIGKILL)
            back = _wait(lambda: (r := runs.load_record("demo", state)) and r.restarts >= 1 and r.is_live() and r, 60)
            out["restarted"] = bool(back)
            if back:
                url = f"http://127.0.0.1:{back.port}/server_info"
                n = _wait(lambda: _threshold(url) == RUNTIME_N, 30)
                out["n_reapplied"] = bool(n)
        return out
    finally:
        t.close()


def _ended(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _threshold(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2, trust_env=False).json()["internal_states"][0]["speculative_disable_batch_threshold"]
    except (httpx.HTTPError, ValueError, KeyError, IndexError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--stuck", action="store_true", help="Textual's writes block on the dead terminal (the field's hang)")
    ap.add_argument(
        "--end", choices=("hangup", "kill9"), default="hangup", help="how the console ends (default: tmux kill-session)"
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="hupbench-") as tmp:
        for i in range(args.cycles):
            row = cycle(Path(tmp), i, args.stuck, args.end)
            rows.append(row)
            if not args.json:
                print(json.dumps(row), flush=True)
    exits = [r["exit_s"] for r in rows if r.get("exit_s") is not None]
    summary = {
        "cycles": len(rows),
        "stuck_writer": args.stuck,
        "end": args.end,
        "consoles_left_after_2s": sum(1 for r in rows if r.get("exit_s") is None or r["exit_s"] > 2.0),
        "runs_without_supervisor": sum(1 for r in rows if not r.get("supervised")),
        "crash_not_restarted": sum(1 for r in rows if r.get("supervised") and not r.get("restarted")),
        "n_not_reapplied": sum(1 for r in rows if r.get("restarted") and not r.get("n_reapplied")),
        "exit_s_median": statistics.median(exits) if exits else None,
        "exit_s_max": max(exits) if exits else None,
        "loadavg": os.getloadavg(),
    }
    print(json.dumps({"summary": summary, "rows": rows} if args.json else summary, indent=None if not args.json else 2))
    bad = summary["consoles_left_after_2s"] + summary["runs_without_supervisor"] + summary["crash_not_restarted"]
    return 1 if bad or summary["n_not_reapplied"] else 0


if __name__ == "__main__":
    end_on_term()
    sys.exit(main())
