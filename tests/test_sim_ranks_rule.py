"""Which tests get the simulator's ranks as threads (``--sim-light``) and which as spawned
processes (tests/support/sim.py ``light_ranks``): the suites about process lifecycles keep
processes, as SGLang's schedulers and the shipped demo have them."""

from __future__ import annotations

import pytest

from tests.support.sim import PROCESS_RANK_SUITES, light_ranks


@pytest.mark.parametrize(
    "current, light",
    [
        ("tests/console/test_app_keys.py::test_keys (call)", True),
        ("tests/advice/test_advise_cli.py::test_x (setup)", True),
        ("tests/test_mode_cost.py::test_y (call)", True),
        ("tests/runs/test_supervisor.py::test_z (setup)", False),
        ("tests/trust/test_full_disk.py::test_z (call)", False),
        ("tests/sim/test_faults.py::test_killed_parent_leaves_ranks_as_orphans_until_group_signal (call)", False),
        ("tests/fleet/test_fleet.py::test_z (call)", False),
        ("tests/cli/test_runs.py::test_supervisor_killed_server_survives_and_is_adopted (setup)", False),
        ("tests/cli/test_runs.py::test_launch_wait_restart_and_stop_commands (setup)", True),
        ("tests/session/test_session_profile.py::test_z (call)", False),
    ],
)
def test_the_process_suites_keep_spawned_ranks(monkeypatch, current, light):
    monkeypatch.setenv("PYTEST_CURRENT_TEST", current)
    assert light_ranks() is light


def test_outside_a_test_the_simulator_keeps_its_own_default(monkeypatch):
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    assert light_ranks() is False  # start_sim from a benchmark or by hand: spawned ranks, as the product


def test_the_named_suites_exist():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for entry in PROCESS_RANK_SUITES:
        path, _, test = entry.partition("::")
        assert (root / path).exists(), entry  # a renamed file or test would silently lose its spawned ranks
        assert not test or f"def {test}(" in (root / path).read_text(), entry
