"""Console benchmark: prints figures (record them in docs/console.md).

    python -m benchmarks.console_bench [--rate 20000] [--seconds 10] [--idle-seconds 30] [--lines 100000]

Each figure comes from the real console in a real pseudo-terminal (200x60,
TERM=xterm-256color, no COLORTERM), its output drained by this process:
  1. stream: a writer appends SGLang-like lines to a log file at --rate lines/s; the console
     follows it with the real LogPipeline + LogStore; every 0.5 s `f` is pressed and the
     time until the screen shows PAUSED / FOLLOW is the key-to-screen latency.
  2. idle: the console attached to an idle simulator (`specconsole attach URL --log FILE`),
     CPU of the console process over --idle-seconds (after a warm-up).
  3. memory: RSS of the console holding --lines lines in its log view.
Goals: 20k lines/s with key-to-screen < 100 ms; idle CPU < 2% of one core; RSS < 200 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

import psutil

from server_control.model.operation import OperationResult
from server_control.model.run_status import RunStatus
from server_control.model.snapshot import LogStatus, SessionSnapshot, SpecStatus
from server_control.model.vocabulary import Outcome
from server_control.proc.sim_launcher import start_sim

REPO = Path(__file__).resolve().parent.parent
COLS, ROWS = 200, 60
DECODE = (
    "[{ts} TP0] Decode batch, #running-req: {r}, #token: {t}, token usage: 0.12, accept len: 2.80, "
    "accept rate: 0.45, cuda graph: True, gen throughput (token/s): 512.30, #queue-req: 0\n"
)


# ---- the console under test, in a pty ----------------------------------------------------
class PtyConsole:
    def __init__(self, argv: list[str]) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("COLORTERM", "TMUX")}
        env.update(TERM="xterm-256color", PYTHONPATH=str(REPO), TEXTUAL_ANIMATIONS="none")
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=str(REPO), start_new_session=True
        )
        os.close(slave)
        self.bytes = 0
        self._tail = b""
        self._want: bytes | None = None
        self._found = threading.Event()
        self._lock = threading.Lock()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            with self._lock:
                window = self._tail + data
                if self._want is not None and self._want in window:
                    self._want = None
                    self._found.set()
                self._tail = window[-64:]

    def expect_after_key(self, key: bytes, marker: str, timeout: float = 5.0) -> float | None:
        """Send ``key``; seconds until ``marker`` is drawn (None on timeout)."""
        with self._lock:
            self._want = marker.encode()
            self._tail = b""
            self._found.clear()
        t0 = time.perf_counter()
        os.write(self.master, key)
        if self._found.wait(timeout):
            return time.perf_counter() - t0
        return None

    def wait_for(self, marker: str, timeout: float = 30.0) -> bool:
        with self._lock:
            self._want = marker.encode()
            self._tail = b""
            self._found.clear()
        return self._found.wait(timeout)

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        os.close(self.master)


# ---- child: the app over a log file only (no server) ---------------------------------------
class LogOnlySession:
    """A ``SessionLike`` over a log file alone: real LogPipeline and LogStore, a constant
    snapshot (no HTTP), for measuring the log view."""

    url = "http://127.0.0.1:9"

    def __init__(self, path: str) -> None:
        from server_control.logs import LogPipeline, LogStore

        self.store = LogStore()
        self._subs: list = []
        self._pipeline = LogPipeline(path, self.store, on_records=lambda _seq: self._publish("logs"), poll_interval=0.01)
        self._task: asyncio.Task | None = None

    def _publish(self, topic: str) -> None:
        for cb in self._subs:
            cb(topic)

    def subscribe(self, cb):
        self._subs.append(cb)
        return lambda: self._subs.remove(cb)

    def snapshot(self) -> SessionSnapshot:
        return SessionSnapshot(
            url=self.url,
            profile="bench",
            attached=True,
            run=RunStatus(state="external"),
            spec=SpecStatus(mode="speculative", threshold=5),
            logs=LogStatus(**self.store.counters()),
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._pipeline.run())

    async def close(self, stop_server: bool = False) -> None:
        self._pipeline.stop()
        if self._task:
            self._task.cancel()

    async def _refuse(self, *_args) -> OperationResult:
        return OperationResult("bench", Outcome.REFUSED, "a log file only")

    def history(self):
        from server_control.state.history import Recorded

        return Recorded()

    launch = stop = restart = verify = set_threshold = set_force = _refuse


def run_child(log_path: str, result_path: str) -> int:
    import gc

    from console.app import SpecConsoleApp

    lags: list[float] = []
    seen = {"rows": 0}
    gc_times: list[float] = []
    gc_start = [0.0]

    def gc_cb(phase, info):
        if phase == "start":
            gc_start[0] = time.perf_counter()
        elif info.get("generation") == 2:
            gc_times.append(time.perf_counter() - gc_start[0])

    gc.callbacks.append(gc_cb)

    async def lag_probe() -> None:
        await asyncio.sleep(2.0)  # start-up (first layout, first load) is not what we measure
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.05)
            lags.append(time.perf_counter() - t - 0.05)
            seen["rows"] = app.log_view.row_count

    class BenchApp(SpecConsoleApp):
        async def on_mount(self) -> None:
            await super().on_mount()
            self.run_worker(lag_probe(), group="bench")

    app = BenchApp(LogOnlySession(log_path))
    app.run(mouse=False)
    lags.sort()
    Path(result_path).write_text(
        json.dumps(
            {
                "store_total": app.session.store.total,
                "rows": seen["rows"],
                "gc_full_collections": len(gc_times),
                "gc_full_max_ms": round(1000 * max(gc_times), 1) if gc_times else None,
                "loop_lag_p50_ms": round(1000 * lags[len(lags) // 2], 1) if lags else None,
                "loop_lag_p90_ms": round(1000 * lags[int(len(lags) * 0.9)], 1) if lags else None,
                "loop_lag_p99_ms": round(1000 * lags[int(len(lags) * 0.99)], 1) if lags else None,
                "loop_lag_max_ms": round(1000 * lags[-1], 1) if lags else None,
            }
        )
    )
    return 0


# ---- the three measurements ---------------------------------------------------------------------
def _writer(path: Path, rate: int, seconds: float, done: dict) -> None:
    ts = time.strftime("%Y-%m-%d %H:%M:%S")
    block = [DECODE.format(ts=ts, r=i % 64, t=i) for i in range(4096)]  # formatted once: the
    written, t0 = 0, time.perf_counter()  # writer stays cheap
    with open(path, "a", buffering=1 << 20) as f:
        while (elapsed := time.perf_counter() - t0) < seconds:
            due = int(elapsed * rate)
            while written < due:
                k = min(due - written, 4096 - written % 4096)
                f.write("".join(block[written % 4096 : written % 4096 + k]))
                written += k
            f.flush()
            time.sleep(0.01)
    done.update(written=written, seconds=time.perf_counter() - t0)


def bench_stream(rate: int, seconds: float, tmp: Path) -> dict:
    log, result = tmp / "stream.log", tmp / "stream.json"
    log.write_text("")
    con = PtyConsole([sys.executable, "-m", "benchmarks.console_bench", "--child", str(log), str(result)])
    try:
        if not con.wait_for("FOLLOW", 30):
            return {"error": "console did not start"}
        time.sleep(2.5)
        done: dict = {}
        writer = threading.Thread(target=_writer, args=(log, rate, seconds, done))
        proc = psutil.Process(con.proc.pid)
        cpu0 = proc.cpu_times()
        writer.start()
        latencies, misses, paused = [], 0, False
        while writer.is_alive():
            time.sleep(0.5)
            lat = con.expect_after_key(b"f", "FOLLOW" if paused else "PAUSED")
            paused = not paused
            if lat is None:
                misses += 1
            else:
                latencies.append(lat)
        writer.join()
        cpu1 = proc.cpu_times()
        if paused:
            con.expect_after_key(b"f", "FOLLOW")
        time.sleep(2.0)
        os.write(con.master, b"q")
        con.proc.wait(30)
        stats = json.loads(result.read_text()) if result.exists() else {}
    finally:
        if con.proc.poll() is None:
            con.close()
    latencies.sort()
    cpu = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / max(done.get("seconds", 1), 1e-9)
    return {
        "lines_written": done.get("written"),
        "rate_lines_s": round(done.get("written", 0) / done.get("seconds", 1)),
        "lines_in_store": stats.get("store_total"),
        "rows_in_view": stats.get("rows"),
        "key_to_screen_ms_median": round(1000 * latencies[len(latencies) // 2], 1) if latencies else None,
        "key_to_screen_ms_max": round(1000 * latencies[-1], 1) if latencies else None,
        "key_presses": len(latencies) + misses,
        "missed": misses,
        "console_cpu_cores": round(cpu, 2),
        "loop_lag_p50_ms": stats.get("loop_lag_p50_ms"),
        "loop_lag_p90_ms": stats.get("loop_lag_p90_ms"),
        "loop_lag_p99_ms": stats.get("loop_lag_p99_ms"),
        "loop_lag_max_ms": stats.get("loop_lag_max_ms"),
        "gc_full_collections": stats.get("gc_full_collections"),
        "gc_full_max_ms": stats.get("gc_full_max_ms"),
        "pty_bytes": con.bytes,
    }


def bench_memory(lines: int, tmp: Path) -> dict:
    log, result = tmp / "memory.log", tmp / "memory.json"
    ts = "2026-11-29 10:00:00"
    with open(log, "w") as f:
        for i in range(lines):
            f.write(DECODE.format(ts=ts, r=i % 64, t=i))
    con = PtyConsole([sys.executable, "-m", "benchmarks.console_bench", "--child", str(log), str(result)])
    try:
        if not con.wait_for(f"{lines} shown", 60):
            return {"error": f"the view did not reach {lines} lines"}
        time.sleep(1.0)
        rss = psutil.Process(con.proc.pid).memory_info().rss
    finally:
        con.close()
    return {"lines": lines, "rss_mb": round(rss / 2**20, 1), "log_file_mb": round(log.stat().st_size / 2**20, 1)}


def bench_idle(seconds: float, tmp: Path) -> dict:
    sim = start_sim(tp=2, threshold=5, traffic="idle", lifetime=seconds + 90, log_path=tmp / "idle-sim.log")
    port, log = sim.port, sim.log_path
    con = None
    try:
        con = PtyConsole([sys.executable, "-m", "console", "attach", f"http://127.0.0.1:{port}", "--log", str(log), "--no-mouse"])
        if not con.wait_for("verify", 30):
            return {"error": "console did not start"}
        time.sleep(5.0)  # warm-up: first polls, first renders
        proc = psutil.Process(con.proc.pid)
        c0, b0, t0 = proc.cpu_times(), con.bytes, time.perf_counter()
        time.sleep(seconds)
        c1, b1, t1 = proc.cpu_times(), con.bytes, time.perf_counter()
        cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0)
        return {
            "seconds": round(t1 - t0, 1),
            "cpu_percent_of_one_core": round(100 * cpu, 2),
            "terminal_bytes_per_s": round((b1 - b0) / (t1 - t0)),
        }
    finally:
        if con is not None:
            con.close()
        sim.stop(grace=15)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.console_bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--rate", type=int, default=20_000, help="lines/s written while streaming")
    p.add_argument("--seconds", type=float, default=10.0, help="streaming duration")
    p.add_argument("--idle-seconds", type=float, default=30.0)
    p.add_argument("--lines", type=int, default=100_000, help="lines held for the RSS figure")
    p.add_argument("--only", choices=("stream", "idle", "memory"))
    p.add_argument("--child", nargs=2, metavar=("LOG", "RESULT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return run_child(*args.child)
    with tempfile.TemporaryDirectory(prefix="specconsole-bench-") as d:
        tmp = Path(d)
        figures = {}
        if args.only in (None, "stream"):
            figures["stream"] = bench_stream(args.rate, args.seconds, tmp)
            print(json.dumps({"stream": figures["stream"]}), flush=True)
        if args.only in (None, "memory"):
            figures["memory"] = bench_memory(args.lines, tmp)
            print(json.dumps({"memory": figures["memory"]}), flush=True)
        if args.only in (None, "idle"):
            figures["idle"] = bench_idle(args.idle_seconds, tmp)
            print(json.dumps({"idle": figures["idle"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
