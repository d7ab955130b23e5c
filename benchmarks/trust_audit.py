"""The fault and hostile-input audit (issues 22 and 37), by hand, not in CI (~5 min):

    python -m benchmarks.trust_audit [--json] [--keep] [--only TEXT]

Every check drives the real CLI (``python -m console``) against real simulator runs in a
private state dir (tmpfs, read-only binds as root), hostile HTTP servers on 127.0.0.1, the
tests' real sshd and real signals: round 3 here and in trust_inputs.py, round 4's 14 items
in trust_run_faults.py, trust_remote_faults.py, trust_file_faults.py. Every pid of ours is
noted (trust_pids.py) and must be gone after each check and at the end. Figures: docs/operations.md

    faults handled as documented   F of N
    bad inputs refused, clearly    B of M   (exit 2 or a one-line refusal, no traceback)
    processes left behind          P        (recorded pids alive after their check or the end)
    data lost                      D        (a setting applied and then missing from the record)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.trust_file_faults import check_file_faults, long_last_line  # noqa: E402
from benchmarks.trust_inputs import check_bad_inputs  # noqa: E402
from benchmarks.trust_pids import OwnPids  # noqa: E402
from benchmarks.trust_remote_faults import check_remote_faults  # noqa: E402
from benchmarks.trust_run_faults import check_run_faults  # noqa: E402
from server_control.host.ports import free_port  # noqa: E402
from server_control.state import runs  # noqa: E402

HOSTILE = REPO / "tests" / "support" / "hostile_http.py"
PROFILE = """\
name = "{name}"
[server]
kind = "sim"
python = "{python}"
model_path = "audit/model"
port = {port}
tp_size = 2
{server_extra}
[dynamic]
threshold = 5
[restart]
backoff_initial_s = 0.2
backoff_max_s = 1.0
burst = 3
stop_grace_s = 3
[health]
interval_s = 0.2
timeout_s = 2.0
failures = 2
[sim]
max_lifetime = 120
time_scale = 20.0
load_time = 0.3
"""


class Audit:
    def __init__(self, root: Path, only: str | None = None) -> None:
        self.root, self.only = root, only
        self.pids = OwnPids()  # everything of ours, by pid: checked after each check and at the end
        self.left: list[str] = []
        self.state = root / "state"
        self.ports: list[int] = []
        self.results: list[dict] = []
        self.lost = 0
        os.environ["SPECCONSOLE_STATE_DIR"] = str(self.state)
        os.environ.pop("SPECCONSOLE_PROFILE", None)

    # -- helpers ----------------------------------------------------------------------------
    def profile(self, name: str, server_extra: str = "", body: str | None = None) -> Path:
        port = free_port()
        self.ports.append(port)
        path = self.root / f"{name}.toml"
        path.write_text(
            body if body is not None else PROFILE.format(name=name, python=sys.executable, port=port, server_extra=server_extra)
        )
        return path

    def cli(self, *args: str, timeout_s: float = 90) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(
                [sys.executable, "-m", "console", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 124, str(exc.stdout or ""), f"timed out after {timeout_s} s")
        finally:
            self.pids.note_records(os.environ.get("SPECCONSOLE_STATE_DIR"))

    @staticmethod
    def serving(port: int) -> list[int]:
        out = []
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or []
            if "--port" in cmd and str(port) in cmd and "server_control.sim" in " ".join(cmd):
                out.append(p.pid)
        return out

    def check(self, kind: str, name: str, fn: Callable[[], tuple[bool, str]]) -> None:
        if self.only and self.only not in name:
            return
        t0 = time.monotonic()
        try:
            ok, note = fn()
        except Exception as exc:  # noqa: BLE001 - a check that raises is a failed check
            ok, note = False, f"{type(exc).__name__}: {exc}"
        self.pids.note_records(self.state)
        left = self.pids.wait_gone(8.0)  # nothing of ours outlives its check
        if left:
            ok, note = False, f"LEFT RUNNING {left}; {note}"
            self.left += left
            self.pids.end_all()
        self.results.append({"kind": kind, "name": name, "ok": ok, "note": note[:300], "s": round(time.monotonic() - t0, 1)})
        print(f"{'ok  ' if ok else 'FAIL'} {kind:5} {name}: {note[:160]}", flush=True)

    def launch(self, path: Path, *flags: str) -> runs.RunRecord:
        """``launch --wait`` (under its own supervisor; ``--no-supervise``: docs/operations.md)."""
        res = self.cli("launch", "--profile", str(path), "--wait", "60", *flags)
        if res.returncode != 0:
            raise RuntimeError(f"launch failed: {res.stdout} {res.stderr}")
        rec = runs.load_record(path.stem)
        assert rec is not None
        return rec

    def stopped_clean(self, path: Path) -> tuple[bool, str]:
        res = self.cli("stop", "--profile", str(path))
        port = int(next(x.split("=")[1] for x in path.read_text().splitlines() if x.startswith("port")))
        time.sleep(0.3)
        left = self.serving(port)
        return res.returncode == 0 and not left, f"stop exit {res.returncode}: {res.stdout.strip()[:120]}; left {left}"

    # -- faults -----------------------------------------------------------------------------
    def fault_launcher_killed(self, when: str) -> tuple[bool, str]:
        path = self.profile(f"kill{when.replace('.', '')}")
        port = self.ports[-1]
        p = subprocess.Popen(
            [sys.executable, "-m", "console", "launch", "--profile", str(path)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if when == "at-server":
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and p.poll() is None:
                p.send_signal(signal.SIGSTOP)
                if self.serving(port):
                    break
                p.send_signal(signal.SIGCONT)
                time.sleep(0.002)
        else:
            time.sleep(float(when))
        p.send_signal(signal.SIGKILL)
        p.wait()
        time.sleep(0.5)
        before = self.serving(port)
        ok, note = self.stopped_clean(path)
        return ok, f"serving before stop: {len(before)}; {note}"

    def fault_record_damaged(self, how: str) -> tuple[bool, str]:
        path = self.profile(f"rec{how}")
        rec = self.launch(path)
        rp = runs.record_path(path.stem)
        if how == "truncated":
            rp.write_text(rp.read_text()[:40])
        else:
            data = json.loads(rp.read_text())
            data[how] = 7 if how == "titles" else 5
            rp.write_text(json.dumps(data))
        status = self.cli("status", "--profile", str(path))
        said = status.stdout + status.stderr
        ok, note = self.stopped_clean(path)
        return ok and "Traceback" not in said and "keeper's note" in said, f"pid {rec.pid}: {note}"

    def fault_record_and_note_lost(self) -> tuple[bool, str]:
        path = self.profile("lost")
        rec = self.launch(path, "--no-supervise")
        runs.record_path(path.stem).write_text("{")
        runs.exit_file(path.stem).unlink(missing_ok=True)
        res = self.cli("stop", "--profile", str(path))
        said = res.stdout
        ok = res.returncode == 1 and f"pid {rec.pid}" in said and "still listening" in said
        os.killpg(rec.pgid, signal.SIGKILL)  # nothing verified it: the audit ends it by its group
        return ok, said.strip()[:200]

    def fault_keeper_killed(self) -> tuple[bool, str]:
        path = self.profile("keeper")
        rec = self.launch(path)
        assert rec.keeper_pid
        os.kill(rec.keeper_pid, signal.SIGKILL)
        time.sleep(0.3)
        status = self.cli("status", "--profile", str(path))
        said = "keeper is gone" in status.stdout + status.stderr
        ok, note = self.stopped_clean(path)
        return ok and said, f"status says keeper gone: {said}; {note}"

    def fault_bad_journal_line(self) -> tuple[bool, str]:
        path = self.profile("journal")
        self.launch(path)
        with open(self.state / "journal.jsonl", "a") as f:
            f.write('{"time": "yesterday", "user": "x", "host": "h", "pid": 1, "program": "p", "action": "x"}\n')
        res = self.cli("threshold", "8", "--profile", str(path))
        rec = runs.load_record(path.stem)
        kept = rec is not None and rec.runtime.get("speculative_disable_batch_threshold") == 8
        if res.returncode == 0 and not kept:
            self.lost += 1
        journal = self.cli("journal")
        ok, note = self.stopped_clean(path)
        return (
            ok and kept and res.returncode == 0 and journal.returncode == 0 and "unreadable line" in journal.stderr
        ), f"kept {kept}; {note}"

    def fault_hostile_http(self, mode: str, command: str) -> tuple[bool, str]:
        port = free_port()
        srv = subprocess.Popen(
            [sys.executable, str(HOSTILE), "--port", str(port), "--mode", mode, "--lifetime", "60"],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.8)
            t0 = time.monotonic()
            proc = subprocess.Popen(
                [sys.executable, "-m", "console", *command.split(), "--url", f"http://127.0.0.1:{port}"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            timer = time.monotonic() + 60
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > timer:
                    proc.kill()
                time.sleep(0.1)
            proc.returncode = os.waitstatus_to_exitcode(status)
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            took = time.monotonic() - t0
            rss = usage.ru_maxrss // 1024
            want = "timed out" if mode == "trickle" else "answer too large"
            return want in out and took < 45 and rss < 400, f"{took:.1f} s, said {want!r}: {want in out}, peak {rss} MB"
        finally:
            os.killpg(srv.pid, signal.SIGKILL)
            srv.wait()

    def fault_full_disk(self, what: str) -> tuple[bool, str]:
        mnt = self.root / f"fs-{what}"
        mnt.mkdir()
        res = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", str(mnt)], capture_output=True, text=True
        )
        if res.returncode != 0:
            return False, f"skipped: cannot mount a tmpfs ({res.stderr.strip()})"
        old = os.environ["SPECCONSOLE_STATE_DIR"]
        os.environ["SPECCONSOLE_STATE_DIR"] = str(mnt / "state")
        try:
            path = self.profile(f"disk{what}")
            port = self.ports[-1]
            if what != "launch":
                self.launch(path)
            else:
                runs.runs_dir()
            try:
                with open(mnt / "filler", "wb") as f:
                    while True:
                        f.write(b"\0" * 65536)
            except OSError:
                pass
            if what == "stop":
                res = self.cli("stop", "--profile", str(path))
                ok = res.returncode == 0 and not self.serving(port) and "could not mark" in res.stdout
                return ok, res.stdout.strip()[:200]
            if what == "threshold":
                res = self.cli("threshold", "9", "--profile", str(path))
                ok = res.returncode == 1 and "NOT kept across a restart" in res.stdout
                self.cli("stop", "--profile", str(path))
                return ok, res.stdout.strip()[:200]
            res = self.cli("launch", "--profile", str(path))
            time.sleep(0.5)
            ok = res.returncode == 1 and not self.serving(port) and "cannot write the run record" in res.stderr
            return ok, (res.stdout + res.stderr).strip()[-200:]
        finally:
            os.environ["SPECCONSOLE_STATE_DIR"] = old
            subprocess.run(["umount", "-l", str(mnt)], check=False)

    def fault_supervise_race(self) -> tuple[bool, str]:
        path = self.profile("race")
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "console", "supervise", "--profile", str(path)],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.serving(self.ports[-1]):
            time.sleep(0.2)
        time.sleep(3)
        alive = [p.poll() is None for p in procs]
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
            p.wait(30)
        ok, note = self.stopped_clean(path)
        return ok and all(alive), f"both still supervising/watching: {alive}; {note}"

    def run_all(self) -> dict:
        for when in ("at-server", "0.4", "0.6", "1.0"):
            self.check("fault", f"launcher SIGKILLed ({when})", partial(self.fault_launcher_killed, when))
        for how in ("truncated", "titles", "log_path"):
            self.check("fault", f"record {how}", partial(self.fault_record_damaged, how))
        self.check("fault", "record unreadable, keeper note gone", self.fault_record_and_note_lost)
        self.check("fault", "keeper SIGKILLed", self.fault_keeper_killed)
        self.check("fault", "bad journal line, then threshold", self.fault_bad_journal_line)
        for mode, command in (
            ("endless", "threshold 8"),
            ("declared", "threshold 8"),
            ("endless", "status"),
            ("trickle", "threshold 8"),
        ):
            self.check("fault", f"HTTP body {mode}: {command}", partial(self.fault_hostile_http, mode, command))
        for what in ("stop", "threshold", "launch"):
            self.check("fault", f"full disk: {what}", partial(self.fault_full_disk, what))
        self.check("fault", "two supervise at once", self.fault_supervise_race)
        self.check("fault", "300 KB last log line in the FATAL tail", long_last_line)
        check_bad_inputs(self)
        check_run_faults(self)
        check_remote_faults(self)
        check_file_faults(self)
        time.sleep(0.5)
        left = self.left + self.pids.wait_gone(5.0)  # by the pids recorded, never by name
        self.pids.end_all()
        faults = [r for r in self.results if r["kind"] == "fault"]
        inputs = [r for r in self.results if r["kind"] == "input"]
        return {
            "faults_ok": sum(r["ok"] for r in faults),
            "faults": len(faults),
            "inputs_ok": sum(r["ok"] for r in inputs),
            "inputs": len(inputs),
            "processes_left": len(left),
            "left": left,
            "pids_tracked": len(self.pids.procs),
            "groups_tracked": len(self.pids.groups),
            "data_lost": self.lost,
            "results": self.results,
        }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the audit's temp dir")
    ap.add_argument("--only", metavar="TEXT", help="run only the checks whose name contains TEXT")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="specconsole-audit-"))
    os.chmod(root, 0o700)
    t0 = time.monotonic()
    try:
        summary = Audit(root, args.only).run_all()
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    summary["seconds"] = round(time.monotonic() - t0, 1)
    summary["load_average"] = [round(x, 2) for x in os.getloadavg()]
    if args.json:
        print(json.dumps(summary, indent=1))
    print(
        f"faults handled as documented  {summary['faults_ok']} of {summary['faults']}\n"
        f"bad inputs refused, clearly   {summary['inputs_ok']} of {summary['inputs']}\n"
        f"processes left behind         {summary['processes_left']}  (of {summary['pids_tracked']} pids and "
        f"{summary['groups_tracked']} process groups recorded)\n"
        f"data lost                     {summary['data_lost']}\n"
        f"took {summary['seconds']} s, load average {summary['load_average']}"
    )
    ok = summary["faults_ok"] == summary["faults"] and summary["inputs_ok"] == summary["inputs"]
    return 0 if ok and not summary["processes_left"] and not summary["data_lost"] else 1


if __name__ == "__main__":
    sys.exit(main())
