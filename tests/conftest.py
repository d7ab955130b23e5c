"""Fixtures shared across test folders; the run's figures (tests/support/run_figures.py)
and, under pytest-xdist, the real-SGLang tier kept in one worker."""

import os
import shutil
import sys
import tempfile

import pytest

from server_control.config import parse_verdicts
from tests.support import collect_skip, run_figures
from tests.support.sim import start_sim
from tests.support.worker_load import WorkerLoad

REAL_SERVER_GROUP = "real-sglang-servers"
_WORKERS: list[WorkerLoad | None] = [None]  # this process's (pytest_runtest_logreport takes no config)
# every `specconsole supervise` a test starts (a run's own detached supervisor included)
# ends within this, whatever the test's cleanup reached: none outlives the run by long
os.environ.setdefault("SPECCONSOLE_SUPERVISE_MAX_S", "420")
# pytest keeps each test module's assertion-rewritten bytecode beside it (a `-pytest-` .pyc
# in __pycache__) unless bytecode writing is off, and these machines set
# PYTHONDONTWRITEBYTECODE=1: every xdist worker then rewrote every test module at every
# collection (~4 of its ~9 CPU-s). This process writes them; its children keep the variable.
sys.dont_write_bytecode = False


def pytest_configure(config):
    config._specconsole_figures = run_figures.make_dir()
    _WORKERS[0] = WorkerLoad(REAL_SERVER_GROUP)
    # SGLang's parser's kept yeses (server_control/config/parse_verdicts.py): one directory for
    # the whole run, its workers included (they inherit the controller's environment), never
    # the user's own cache
    if not os.environ.get(parse_verdicts.CACHE_DIR_ENV):
        config._specconsole_verdicts = tempfile.mkdtemp(prefix="specconsole-verdicts-")
        os.environ[parse_verdicts.CACHE_DIR_ENV] = config._specconsole_verdicts


def pytest_unconfigure(config):
    run_figures.remove_dir(getattr(config, "_specconsole_figures", None))
    verdicts = getattr(config, "_specconsole_verdicts", None)
    if verdicts:
        shutil.rmtree(verdicts, ignore_errors=True)
        os.environ.pop(parse_verdicts.CACHE_DIR_ENV, None)


def pytest_ignore_collect(collection_path, config):
    """A module whose module-wide marks the ``-m`` expression deselects is not imported
    (tests/support/collect_skip.py): the fast loop's workers no longer import sglang and
    torch to collect the SGLang tier they then deselect."""
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        marks = collect_skip.module_marks(collection_path)
        if marks and collect_skip.deselects_whole(config.getoption("markexpr", "") or "", marks):
            return True
    return None


def shared_fixture_group(item) -> str | None:
    """The group of a test that uses a fixture set up once per module, class or package
    (a launched fleet, a simulator the module's tests read in file order): its module's, so
    xdist sends the module's tests to one worker together. Otherwise ``--dist loadgroup``
    spreads them one by one and every worker that gets one sets the fixture up again, with
    the tests before it in the file run elsewhere (a fleet launched twice, the second one
    read minutes later by tests that assume the first ones ran)."""
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(chain and chain[-1].scope in ("module", "class", "package") for chain in defs.values()):
        return f"module:{item.module.__name__}" if getattr(item, "module", None) else None
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which turns the mark into the "@group" its scheduler reads
def pytest_collection_modifyitems(config, items):
    """Under ``--dist loadgroup`` every test that starts a real SGLang server runs in one
    worker, one server at a time (each takes ~3 GB and both cores while it starts); a
    module whose tests share a fixture runs in one worker, in file order; the rest of the
    suite is spread test by test."""
    for item in items:
        if item.get_closest_marker("sglang_server") is not None:
            item.add_marker(pytest.mark.xdist_group(REAL_SERVER_GROUP))
        elif item.get_closest_marker("xdist_group") is None and (group := shared_fixture_group(item)):
            item.add_marker(pytest.mark.xdist_group(group))


# The fast loop's longest tests (15-75 s each on 6 workers, 2026-12-07), sent out first: spread
# test by test in collection order, they otherwise started near the end (tests/trust/ and
# tests/test_mode_cost.py sort late) and left the other workers idle while the last ran. A
# name that no longer matches costs nothing but its place.
SLOW_FIRST = (
    "tests/cli/test_documented_commands.py::test_documented_commands_against_the_demo",
    "tests/test_mode_cost.py::test_relaunched_runs_every_round_on_servers_of_its_own",
    "tests/fleet/test_launch_wait.py::test_launch_wait_waits_until_a_late_member_is_routed",
    "tests/console/fleet/test_screen.py::test_fleet_console_end_to_end",
    "tests/cli/test_documented_commands.py::test_documented_commands_with_nothing_running",
    "tests/trust/test_full_disk.py::test_supervise_on_a_full_disk_keeps_supervising",
    "tests/console/test_operator_tmux.py::test_operator_screen_in_a_16_colour_terminal",
    "tests/console/test_run_supervisor.py::test_the_run_has_its_own_supervisor_and_the_console_is_its_client",
    "tests/cli/test_fleet.py::test_headless_fleet_launch_status_steer_verify_stop",
    "tests/test_mode_cost.py::test_the_cold_arms_run_cold_and_every_other_arm_warm_by_the_servers_counters",
    "tests/test_mode_cost.py::test_interleaved_runs_every_arm_every_round_pausing_the_other_server",
    "tests/trust/test_supervise_race.py::test_two_supervise_at_once_one_supervises_the_other_watches",
    "tests/test_loadgen.py::test_sweep_interleaves_every_arm_in_every_round_and_checks_the_server",
)


# pytest registers a conftest's hooks by their "pytest_" names only, hence this one's name
@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")  # after `-m` deselected what the run leaves out
def pytest_slow_tests_first(items):
    """Without the real-server tier (the fast loop), SLOW_FIRST's tests go first. With it,
    the order stays as it is: there the real-server group is the run's critical path."""
    if any(item.get_closest_marker("sglang_server") is not None for item in items):
        return
    items.sort(key=lambda item: not item.nodeid.startswith(SLOW_FIRST))  # stable: the rest keep their order


def pytest_runtest_logreport(report):
    """On the controller of an xdist run, each report names its worker (``report.node``)."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    if gateway is not None and _WORKERS[0] is not None:
        _WORKERS[0].add(str(gateway.id), report.nodeid, report.when, report.duration)


def pytest_terminal_summary(terminalreporter):
    if getattr(terminalreporter.config, "_specconsole_figures", None) is None:
        return  # a worker: the controller prints
    lines = run_figures.read_all()
    if lines:
        terminalreporter.section("real SGLang on CPU: measured figures")
        for line in run_figures.summary(lines):
            terminalreporter.write_line(line)
    load = _WORKERS[0]
    if load is not None and load.lines():
        terminalreporter.section("xdist workers")
        for line in load.lines():
            terminalreporter.write_line(line)


@pytest.fixture
def sim_factory(tmp_path):
    """start_sim(...) with every started simulator stopped (by its group) at teardown."""
    handles = []

    def factory(*extra_args, **kwargs):
        handle = start_sim(tmp_path, *extra_args, **kwargs)
        handles.append(handle)
        return handle

    yield factory
    for handle in handles:
        handle.stop()
