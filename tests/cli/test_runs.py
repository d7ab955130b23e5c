"""The headless commands as real processes: `specconsole supervise` SIGKILLed while the
server keeps serving, a new one adopts it without a second launch; launch/stop/restart."""

from __future__ import annotations

import json
import os
import signal

import httpx
import psutil
import pytest

from server_control.host import identity
from server_control.state import runs
from tests.support import parserless
from tests.support.cli import cli, read_until, start_cli
from tests.support.wait import wait_for


def health(url: str) -> int | None:
    try:
        return httpx.get(url + "/health", timeout=2.0, trust_env=False).status_code
    except httpx.HTTPError:
        return None


def run_pids(rec: runs.RunRecord) -> set[int]:
    return {p.pid for p in identity.run_processes(rec.identity())}


def test_supervisor_killed_server_survives_and_is_adopted(make_profile, groups, state_dir):
    path = make_profile("adopt", tp=2)
    url = None
    sup1 = start_cli("supervise", "--profile", str(path), groups=groups)
    out = read_until(sup1, ": ready")
    assert any(line.startswith("launched adopt: pid") for line in out), out
    states = [line.split("  ", 1)[1] for line in out if "  adopt: " in line]
    assert len(states) == len(set(states)), out  # each state change printed once
    rec = runs.load_record("adopt")
    groups.add(rec.pgid)
    url = f"http://127.0.0.1:{rec.port}"
    before = wait_for(lambda: (lambda s: s if len(s) >= 3 else None)(run_pids(rec)), what="3 processes")

    os.kill(sup1.pid, signal.SIGKILL)  # the console dies hard
    sup1.wait(timeout=30)
    assert health(url) == 200  # ... the server keeps serving
    assert runs.load_record("adopt").pid == rec.pid and rec.is_live()

    refused = cli("launch", "--profile", str(path))
    assert refused.returncode == 3 and "already running" in refused.stderr

    sup2 = start_cli("supervise", "--profile", str(path), "--json", groups=groups)
    first = json.loads(read_until(sup2, '"event": "adopted"')[-1])
    assert first["event"] == "adopted" and first["run"]["pid"] == rec.pid
    wait_for(lambda: health(url) == 200, what="health")
    assert runs.load_record("adopt").pid == rec.pid  # no second launch
    assert len(list((state_dir / "logs" / "adopt").glob("*.log"))) == 1
    assert run_pids(rec) == before

    sup2.send_signal(signal.SIGINT)  # Ctrl-C detaches
    tail = sup2.communicate(timeout=30)[0]
    assert sup2.returncode == 0 and '"detached"' in tail
    assert health(url) == 200

    stopped = cli("stop", "--profile", str(path), "--json")
    assert stopped.returncode == 0, stopped.stderr
    res = json.loads(stopped.stdout)
    assert res["ok"] and res["remaining"] == [] and before <= set(res["signalled"])
    assert [pid for pid in before if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE] == []
    assert runs.load_record("adopt") is None and health(url) is None


def test_launch_wait_restart_and_stop_commands(make_profile, groups, state_dir):
    path = make_profile("cmd", tp=1)
    r = cli("launch", "--profile", str(path), "--wait", "60", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    groups.add(out["run"]["pgid"])
    assert out["state"] == "ready" and out["run"]["port"] > 0
    r2 = cli("restart", "--profile", str(path), "--wait", "60", "--json")
    assert r2.returncode == 0, r2.stderr
    out2 = json.loads(r2.stdout)
    groups.add(out2["run"]["pgid"])
    assert out2["run"]["pid"] != out["run"]["pid"] and out2["state"] == "ready"
    assert not psutil.pid_exists(out["run"]["pid"]) or psutil.Process(out["run"]["pid"]).status() == psutil.STATUS_ZOMBIE
    s = cli("stop", "--profile", str(path), "--grace", "3")
    assert s.returncode == 0 and "stopped" in s.stdout
    again = cli("stop", "--profile", str(path))
    assert again.returncode == 0 and "not running" in again.stdout


@pytest.mark.parametrize(
    "parser",
    [
        # the real SGLang's parser is asked in a fresh interpreter (it imports sglang: ~7 CPU-s)
        pytest.param("sglang", marks=pytest.mark.sglang),
        "unreachable",  # the fast loop's: the same command line, masked, without the parser
    ],
)
def test_dry_run_of_the_shipped_tp8_profile_masks_the_key(parser, tmp_path, state_dir, monkeypatch):
    monkeypatch.setenv("SGLANG_API_KEY", "top-secret")
    profile = "eagle3-tp8" if parser == "sglang" else str(parserless.tp8_without_parser(tmp_path))
    r = cli("launch", "--profile", profile, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert (parserless.UNREACHABLE in r.stderr) is (parser == "unreachable"), r.stderr
    assert "top-secret" not in r.stdout and "SPECCONSOLE_API_KEY='****'" in r.stdout
    assert "--api-key" not in r.stdout
    assert "NCCL_IB_DISABLE=1" in r.stdout and "server_control.sglang_patch.serve" in r.stdout


def test_bad_profile_exit_codes(tmp_path, state_dir):
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nport = 'x'\n")
    r = cli("launch", "--profile", str(bad))
    assert r.returncode == 2 and "bad.toml: [server] port: expected an integer" in r.stderr
    r = cli("supervise", "--profile", str(tmp_path / "none.toml"))
    assert r.returncode == 2 and "none.toml: cannot read profile" in r.stderr


def test_stop_and_restart_from_elsewhere_while_supervised(make_profile, groups, state_dir):
    path = make_profile("ext", tp=1)
    sup = start_cli("supervise", "--profile", str(path), "--json", "--linger", "2", groups=groups)
    seen = read_until(sup, '"state": "ready"')
    first = runs.load_record("ext")
    groups.add(first.pgid)
    r = cli("restart", "--profile", str(path), "--wait", "60", "--json")  # another terminal
    assert r.returncode == 0, r.stderr
    new_pid = json.loads(r.stdout)["run"]["pid"]
    groups.add(new_pid)
    # the supervisor sees a stop (not a crash: no restart of its own), then adopts the new run
    seen += read_until(sup, f'"pid": {new_pid}')
    events = [json.loads(s) for s in seen if s.startswith("{")]
    assert "crashed" not in [e.get("state") for e in events]
    assert events[-1]["restarts"] == 0 and events[-1]["pid"] == new_pid
    s = cli("stop", "--profile", str(path))
    assert s.returncode == 0, s.stderr
    rest = sup.communicate(timeout=60)[0]
    assert sup.returncode == 0 and '"event": "stopped"' in rest
    assert runs.load_record("ext") is None  # nobody relaunched it
    assert runs.list_records() == []


def test_launch_wait_reports_a_server_that_dies_before_ready(make_profile, groups, state_dir):
    path = make_profile("dies", tp=1)
    text = path.read_text().replace(
        'extra_args = ["--decode-log-interval", "5"]', 'extra_args = ["--decode-log-interval", "0"]'
    )  # sim refuses it
    path.write_text(text)
    r = cli("launch", "--profile", str(path), "--wait", "60")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "state crashed" in r.stdout and "exited before ready: exit code 2" in r.stdout
    assert "--- last" in r.stderr and "decode-log-interval" in r.stderr


def test_supervise_says_when_a_crashed_server_restarts(make_profile, groups, state_dir):
    path = make_profile("bo", tp=1, backoff=2.0)
    sup = start_cli("supervise", "--profile", str(path), groups=groups)
    read_until(sup, "bo: ready")
    rec = runs.load_record("bo")
    groups.add(rec.pgid)
    os.killpg(rec.pgid, signal.SIGKILL)
    seen = read_until(sup, "restarts 1")
    assert any("bo: crashed" in line for line in seen), seen
    assert any("restart in " in line for line in seen), seen  # the countdown, not only the crash
    sup.send_signal(signal.SIGTERM)
    sup.communicate(timeout=30)
    assert (cli("stop", "--profile", str(path))).returncode == 0
