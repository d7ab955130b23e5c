"""What the console costs while it is open: prints figures (record them in docs/console.md).

    python -m benchmarks.console_cost [--seconds 30] [--arms busy,idle,fleet] [--members 32]
                                      [--tree DIR ...] [--rounds 1] [--rss-minutes 0] [--profile]

Each arm runs the real console (`specconsole ...`, in benchmarks/console_cost_child.py's
process, which counts) in a real pseudo-terminal (120x40, TERM=xterm-256color; the
PtyConsole of console_bench: this process reads every byte the console writes, as ssh
would carry it) and prints, per phase, the console process's CPU in % of one core, its
RSS, the session snapshots it built per second and the terminal bytes it wrote per second:
  busy:  `specconsole demo --time-scale 2` (the simulator with wave traffic, supervised by
         the console); phases "following" (the log view follows the end) and "paused"
         (`f` pressed: the view stays, the lines arrive).
  idle:  the demo profile with `traffic = "idle"`, launched by the console; phase "idle",
         after --idle-warmup (120 s) so the batch chart is full (until then each poll draws a
         new bar: a change on screen).
  fleet: 32 simulators (`--sim-light`, TP 1, wave traffic) attached by URL with their logs,
         the fleet screen (`specconsole fleet`) polling each at 1 Hz; phase "fleet".
`--tree DIR` (repeatable) runs the console from another checkout (e.g. a worktree of the
commit before a change): arms and trees are interleaved round by round, so a shared
machine's drift hits each alike. `--rss-minutes M` adds a long "following" phase on the busy
arm sampling RSS every 30 s (the flat-RSS goal is over 10 minutes). `--profile` samples the
console with pyinstrument during each phase and writes the report next to the figures.
The load average (`os.getloadavg`) is printed with each figure.
Goals (issue 24): busy < 10 % of a core, idle < 2 %, the 32-member fleet < 15 %, RSS flat
within 10 MB over 10 minutes, terminal output <= 10 KB/s busy and ~0 when nothing changes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COLS, ROWS = 120, 40
PROFILE_DIR = Path(tempfile.gettempdir()) / "specconsole-console-cost"
CHILD = Path(__file__).resolve().parent / "console_cost_child.py"  # run by path: the console's process


# ---- the arms -------------------------------------------------------------------------------
class Arm:
    """One console under test: started, measured phase by phase, stopped."""

    def __init__(self, tree: Path, tmp: Path, argv: list[str], ready: str) -> None:
        from benchmarks.console_bench import PtyConsole

        self.tree, self.tmp = tree, tmp
        self.stats = tmp / "stats.json"
        env_path = f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
        os.environ["SPECCONSOLE_BENCH_PYTHONPATH"] = env_path
        wrapper = [sys.executable, str(CHILD), str(self.stats), "--", *argv]
        self.con = _pty(PtyConsole, wrapper, tree, env_path)
        self.ready = self.con.wait_for(ready, 90)

    def counts(self) -> dict:
        try:
            return dict(json.loads(self.stats.read_text()))
        except (OSError, ValueError):
            return {}

    def snapshots(self) -> int:
        return int(self.counts().get("snapshots", 0))

    def phase(self, name: str, seconds: float, profile: bool, out_dir: Path) -> dict:
        import psutil

        proc = psutil.Process(self.con.proc.pid)
        if profile:
            os.kill(proc.pid, signal.SIGUSR2)
        time.sleep(0.6)  # the stats file is rewritten every 0.5 s
        r0 = self.counts()
        c0, b0, s0, t0 = proc.cpu_times(), self.con.bytes, self.snapshots(), time.perf_counter()
        rss = [proc.memory_info().rss]
        while time.perf_counter() - t0 < seconds:
            time.sleep(min(30.0, seconds - (time.perf_counter() - t0)) if seconds > 60 else seconds)
            rss.append(proc.memory_info().rss)
        c1, b1, s1, t1 = proc.cpu_times(), self.con.bytes, self.snapshots(), time.perf_counter()
        r1 = self.counts()
        dt = t1 - t0
        fig = {
            "phase": name,
            "seconds": round(dt, 1),
            "cpu_percent_of_one_core": round(100 * (c1.user + c1.system - c0.user - c0.system) / dt, 2),
            "rss_mb": round(rss[-1] / 2**20, 1),
            "rss_growth_mb": round((rss[-1] - rss[0]) / 2**20, 1),
            "snapshot_builds_per_s": round((s1 - s0) / dt, 2),
            "terminal_bytes_per_s": round((b1 - b0) / dt),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }
        fig["bytes_per_s_by_widget"] = {
            k.removeprefix("bytes:"): round((v - r0.get(k, 0)) / dt)
            for k, v in sorted(r1.items())
            if k.startswith("bytes:") and v > r0.get(k, 0)
        }
        fig["refreshes_per_s"] = {
            k.removeprefix("refresh:"): round((v - r0.get(k, 0)) / dt, 1)
            for k, v in sorted(r1.items())
            if k.startswith("refresh:") and v > r0.get(k, 0)
        }
        if seconds > 60:
            fig["rss_mb_samples"] = [round(r / 2**20, 1) for r in rss]
        if profile:
            os.kill(proc.pid, signal.SIGUSR1)
            src = Path(str(self.stats) + ".prof.txt")
            for _ in range(50):
                if src.exists():
                    break
                time.sleep(0.1)
            if src.exists():
                dest = out_dir / f"{self.tree.name}-{name}.prof.txt"
                dest.write_text(src.read_text())
                src.unlink()
                session = Path(str(self.stats) + ".pyisession")
                if session.exists():
                    session.replace(dest.with_suffix(".pyisession"))
                fig["profile"] = str(dest)
        return fig

    def key(self, key: bytes, marker: str) -> bool:
        return self.con.expect_after_key(key, marker, 10.0) is not None

    def close(self) -> None:
        if self.con.proc.poll() is None:
            self.con.close()


def _pty(cls, argv: list[str], tree: Path, pythonpath: str):  # type: ignore[no-untyped-def]
    import benchmarks.console_bench as cb

    saved = cb.REPO, cb.COLS, cb.ROWS
    cb.REPO, cb.COLS, cb.ROWS = tree, COLS, ROWS
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = pythonpath  # PtyConsole sets PYTHONPATH=REPO: the tree's
    try:
        return cls(argv)
    finally:
        cb.REPO, cb.COLS, cb.ROWS = saved
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _cli(tree: Path, *args: str, timeout: float = 60) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run(
        [sys.executable, "-m", "console", *args],
        env=env,
        cwd=str(tree),
        timeout=timeout,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


def _quit_stopping(arm: Arm) -> None:
    """`q`, then `s` (stop the server): nothing is handed off or left running."""
    try:
        if arm.key(b"q", "Leave"):
            os.write(arm.con.master, b"s")
            arm.con.proc.wait(60)
    except (OSError, subprocess.TimeoutExpired):
        pass
    arm.close()


def bench_busy(tree: Path, seconds: float, rss_minutes: float, profile: bool, out: Path) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="specconsole-cost-") as d:
        tmp = Path(d)
        state = tmp / "demo-state"
        arm = Arm(tree, tmp, ["demo", "--time-scale", "2", "--state-dir", str(state)], "speculative")
        figs: list[dict] = []
        try:
            if not arm.ready:
                return [{"arm": "busy", "error": "the demo screen did not show"}]
            time.sleep(20.0)  # warm-up: the simulator up, the first waves, first renders
            figs.append(arm.phase("following", seconds, profile, out))
            if arm.key(b"f", "PAUSED"):
                figs.append(arm.phase("paused", seconds, profile, out))
                arm.key(b"f", "FOLLOW")
            else:
                figs.append({"phase": "paused", "error": "f did not pause the log view"})
            if rss_minutes:
                figs.append(arm.phase("following-long", 60 * rss_minutes, False, out))
        finally:
            _quit_stopping(arm)
            _cli(tree, "stop", "--demo", "--state-dir", str(state))
        return [{"arm": "busy", **f} for f in figs]


def bench_idle(tree: Path, seconds: float, profile: bool, out: Path, warmup: float = 120.0) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="specconsole-cost-") as d:
        tmp = Path(d)
        demo = (REPO / "assets" / "profiles" / "demo.toml").read_text()
        from server_control.host.ports import free_port

        prof = tmp / "idle.toml"
        prof.write_text(
            demo.replace('name = "demo"', 'name = "idle"')
            .replace('traffic = "wave"', 'traffic = "idle"')
            .replace("port = 30000", f"port = {free_port()}")
        )
        state = tmp / "state"
        arm = Arm(tree, tmp, ["ui", "--profile", str(prof), "--state-dir", str(state)], "Launch it now")
        figs: list[dict] = []
        try:
            if not arm.ready:
                return [{"arm": "idle", "error": "the launch question did not show"}]
            os.write(arm.con.master, b"y")
            time.sleep(warmup)  # until the batch chart is full: before, each poll adds a bar
            figs.append(arm.phase("idle", seconds, profile, out))
        finally:
            _quit_stopping(arm)
            _cli(tree, "stop", "--profile", str(prof), "--state-dir", str(state))
        return [{"arm": "idle", **f} for f in figs]


def start_fleet_sims(members: int, tmp: Path, lifetime: float) -> tuple[list, Path]:
    from server_control.proc.sim_launcher import start_sim

    sims = [
        start_sim(
            "--sim-light",
            tp=1,
            threshold=5,
            traffic="wave:10:60",
            time_scale=1.0,
            lifetime=lifetime,
            seed=i,
            log_path=tmp / f"sim-{i}.log",
        )
        for i in range(members)
    ]
    for sim in sims:
        sim.wait_ready(180)
    lines = ['name = "cost"', "poll_interval_s = 1.0", ""]
    for i, sim in enumerate(sims):
        lines += [f"[members.m{i:02d}]", f'url = "{sim.url}"', f'log = "{sim.log_path}"', ""]
    path = tmp / "cost.toml"
    path.write_text("\n".join(lines))
    return sims, path


def bench_fleet(tree: Path, fleet_path: Path, members: int, seconds: float, profile: bool, out: Path) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="specconsole-cost-") as d:
        tmp = Path(d)
        arm = Arm(tree, tmp, ["fleet", "--fleet", str(fleet_path), "--state-dir", str(tmp / "state")], f"{members} members")
        try:
            if not arm.ready:
                return [{"arm": "fleet", "error": "the fleet screen did not show"}]
            time.sleep(15.0)
            fig = arm.phase("fleet", seconds, profile, out)
        finally:
            try:
                os.write(arm.con.master, b"q")
                arm.con.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                pass
            arm.close()
        return [{"arm": "fleet", "members": members, **fig}]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.console_cost", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, default=30.0, help="length of each measured phase")
    p.add_argument("--arms", default="busy,idle,fleet")
    p.add_argument("--members", type=int, default=32)
    p.add_argument("--tree", action="append", type=Path, help="checkout to run the console from (repeatable)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--rss-minutes", type=float, default=0.0)
    p.add_argument("--profile", action="store_true")
    p.add_argument(
        "--idle-warmup",
        type=float,
        default=120.0,
        help="seconds before the idle phase (the batch chart fills: until then each poll adds a bar)",
    )
    args = p.parse_args(argv)
    if args.profile:
        try:
            import pyinstrument  # noqa: F401 - the console's process imports it on SIGUSR2
        except ImportError:
            p.error("--profile needs pyinstrument: pip install -e '.[bench]' (without it the console dies at the signal)")
    trees = [t.resolve() for t in (args.tree or [REPO])]
    arms = args.arms.split(",")
    out = PROFILE_DIR
    out.mkdir(parents=True, exist_ok=True)
    sims: list = []
    fleet_path = None
    with tempfile.TemporaryDirectory(prefix="specconsole-cost-fleet-") as d:
        try:
            if "fleet" in arms:
                lifetime = (args.seconds + 120) * len(trees) * args.rounds + 300
                sims, fleet_path = start_fleet_sims(args.members, Path(d), lifetime)
            for rnd in range(args.rounds):
                for arm in arms:
                    for tree in trees:
                        if arm == "busy":
                            figs = bench_busy(tree, args.seconds, args.rss_minutes, args.profile, out)
                        elif arm == "idle":
                            figs = bench_idle(tree, args.seconds, args.profile, out, args.idle_warmup)
                        else:
                            assert fleet_path is not None
                            figs = bench_fleet(tree, fleet_path, args.members, args.seconds, args.profile, out)
                        for f in figs:
                            print(json.dumps({"round": rnd, "tree": str(tree), **f}), flush=True)
        finally:
            for sim in sims:
                sim.stop(grace=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
