"""A sim profile in tmp with a private state dir; every launched run is stopped by its
process group at the end (never by name)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support.sim import light_ranks

PROFILE = """\
name = "{name}"
[server]
kind = "sim"
python = "{python}"
model_path = "sim/model"
host = "127.0.0.1"
port = {port}
tp_size = 2
log_dir = "{log_dir}"
extra_args = ["--decode-log-interval", "10"]
[speculative]
algorithm = "EAGLE3"
draft_model_path = "sim/draft"
[dynamic]
threshold = 5
[restart]
stop_grace_s = 5.0
[health]
interval_s = 0.2
timeout_s = 2.0
[sim]
traffic = "wave:12:20"
time_scale = 20.0
load_time = 1.0
max_lifetime = 120.0
light = {light}
"""


@pytest.fixture
def sim_profile(tmp_path, monkeypatch):
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    path = tmp_path / "simtest.toml"
    path.write_text(
        PROFILE.format(
            name=f"simtest{os.getpid()}",
            python=sys.executable,
            port=free_port(),
            log_dir=tmp_path / "logs",
            light=str(light_ranks()).lower(),  # spawned ranks in the process suites (tests/support/sim.py)
        )
    )
    yield path
    for rec in runs.list_records(state):
        if rec.is_live():
            try:
                os.killpg(rec.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
