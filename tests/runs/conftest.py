"""Fixtures for the run tests: a private state dir, free ports, profiles written to tmp,
and a finalizer that stops every process group these tests started (never by name)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support.sim import light_ranks

PROFILE_TEMPLATE = """\
name = "{name}"
[server]
kind = "sim"
python = "{python}"
model_path = "test/model"
host = "127.0.0.1"
port = {port}
tp_size = {tp}
extra_args = ["--decode-log-interval", "5"]
[speculative]
algorithm = "EAGLE3"
draft_model_path = "test/draft"
[dynamic]
threshold = 5
[restart]
backoff_initial_s = {backoff}
backoff_max_s = 2.0
burst = {burst}
window_s = 60.0
stop_grace_s = {grace}
keep_logs = {keep_logs}
[health]
interval_s = 0.2
timeout_s = 2.0
failures = 2
{health_extra}
[sim]
max_lifetime = {lifetime}
time_scale = 20.0
load_time = {load_time}
light = {light}
{sim_extra}
"""


@pytest.fixture
def state_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(d))
    monkeypatch.delenv("SPECCONSOLE_PROFILE", raising=False)
    return d


@pytest.fixture
def make_profile(tmp_path, state_dir):
    def make(
        name: str = "t",
        port: int | None = None,
        tp: int = 2,
        backoff: float = 0.2,
        burst: int = 5,
        grace: float = 5.0,
        keep_logs: int = 20,
        lifetime: float = 90.0,
        sim_extra: str = "",
        load_time: float = 0.5,
        health_extra: str = "",
    ) -> Path:
        path = tmp_path / f"{name}.toml"
        path.write_text(
            PROFILE_TEMPLATE.format(
                name=name,
                python=sys.executable,
                port=port or free_port(),
                tp=tp,
                backoff=backoff,
                burst=burst,
                grace=grace,
                keep_logs=keep_logs,
                lifetime=lifetime,
                sim_extra=sim_extra,
                load_time=load_time,
                health_extra=health_extra,
                light=str(light_ranks()).lower(),  # spawned ranks in the process suites (tests/support/sim.py)
            )
        )
        return path

    return make


def run_supervisor_group(rec: runs.RunRecord) -> list[int]:
    """The group of the run's own detached supervisor (a session leader: its pid), never
    this process's."""
    info = rec.supervisor or {}
    pid = info.get("pid")
    try:
        if info.get("kind") == "run" and isinstance(pid, int) and pid != os.getpid() and os.getpgid(pid) == pid:
            return [pid]
    except (ProcessLookupError, PermissionError):
        pass
    return []


@pytest.fixture
def groups(state_dir):
    """Register process groups to kill at teardown; every run record's group is killed too."""
    pgids: set[int] = set()
    yield pgids
    for rec in runs.list_records(state_dir) if state_dir.exists() else []:
        pgids.add(rec.pgid)
        pgids.update(run_supervisor_group(rec))
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for p in psutil.process_iter():  # re-grouped children of the run: same session
            try:
                if os.getsid(p.pid) == pgid and p.pid != os.getpid():
                    p.kill()
            except (ProcessLookupError, PermissionError, psutil.Error, OSError):
                pass
