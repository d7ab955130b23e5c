"""Start the simulator as a real process for tests (server_control.proc.sim_launcher with test
defaults: time scale 20, idle traffic, the log in the test's tmp dir).

    with start_sim(tmp_path, "--enable-metrics", tp=2, threshold=5) as sim:
        sim.wait_ready()
        httpx.get(sim.url + "/health")

The process runs in a new session (its pid is the process group id); stop() signals that
group: SIGTERM, then SIGKILL after a grace period. Nothing outlives ``--sim-max-lifetime``.
"""

from __future__ import annotations

import os
from pathlib import Path

from server_control.host.ports import free_port
from server_control.proc import sim_launcher as launcher
from server_control.proc.sim_launcher import DEFAULT_LIFETIME_S, SimProcess, group_pids

__all__ = [
    "DEFAULT_LIFETIME_S",
    "CLIENT_WINDOW_TIME_SCALE",
    "DEFAULT_TIME_SCALE",
    "REPO_ROOT",
    "SimHandle",
    "free_port",
    "group_pids",
    "light_ranks",
    "sim_argv",
    "start_sim",
]

REPO_ROOT = launcher.PACKAGE_ROOT
DEFAULT_TIME_SCALE = 20.0
# For a simulator that a test's own clients load for fixed wall-clock windows (bench,
# loadgen, mode_cost): the same windows at a quarter of the tokens, so a quarter of the CPU
# in the simulator and in the clients (those three files: 64 -> 26 CPU-s)
CLIENT_WINDOW_TIME_SCALE = 5.0
SimHandle = SimProcess
WAVE = "wave:12:20"  # 1..12 requests and back every 20 simulated seconds (1 s at x20)


# The suites about process lifecycles (orphaned ranks, group stops, rank pids, what spawned
# ranks inherit) run the simulator's TP ranks as spawned processes, as SGLang's schedulers and
# the shipped demo do. Every other suite runs them as threads inside the simulator's one
# process (``--sim-light``, rank_objects.py: the same per-rank switch and log lines; a third
# of the CPU under traffic, 0.08-0.10 CPU-s a second against 0.26-0.32, and half the start-up:
# docs/cpu-rig.md "The fast loop").
PROCESS_RANK_SUITES = (
    "tests/runs/",
    "tests/trust/",
    "tests/sim/",
    "tests/fleet/",
    "tests/cli/test_runs.py::test_supervisor_killed_server_survives_and_is_adopted",  # the ranks outlive a killed supervisor
    "tests/session/test_session_profile.py",  # the session's stop leaves none of the run's processes
)


def light_ranks() -> bool:
    """Whether the test now running (pytest's ``PYTEST_CURRENT_TEST``) gets in-process ranks."""
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return bool(current) and not current.startswith(PROCESS_RANK_SUITES)


def sim_argv(port: int, *extra_args: str, time_scale: float = DEFAULT_TIME_SCALE, **options) -> list[str]:
    return launcher.sim_argv(port, *extra_args, time_scale=time_scale, **options)


def start_sim(
    tmp_path, *extra_args: str, port: int | None = None, time_scale: float = DEFAULT_TIME_SCALE, **options
) -> SimProcess:
    """Start the simulator (not waiting for ready), its log in ``tmp_path``. ``argv=``
    replaces the whole command. Its ranks are threads unless the test is in a
    ``PROCESS_RANK_SUITES`` directory (``light_ranks``)."""
    port = free_port() if port is None else port
    if "argv" not in options and "--sim-light" not in extra_args and light_ranks():
        extra_args = (*extra_args, "--sim-light")
    return launcher.start_sim(
        *extra_args, port=port, log_path=Path(tmp_path) / f"sim-{port}.log", time_scale=time_scale, **options
    )
