"""The run summary's per-worker lines (tests/support/worker_load.py)."""

from tests.support.worker_load import WorkerLoad


def test_each_worker_is_summed_and_the_last_to_finish_is_the_critical_path():
    load = WorkerLoad("servers", started=100.0)
    load.add("gw0", "t.py::a", "setup", 2.0, now=101.0)
    load.add("gw0", "t.py::a", "call", 3.0, now=104.0)
    load.add("gw1", "t.py::b@servers", "setup", 40.0, now=140.0)
    load.add("gw1", "t.py::b@servers", "call", 5.0, now=145.0)
    load.add("gw1", "t.py::b@servers", "teardown", 1.0, now=146.0)
    assert load.lines() == [
        "gw0: 1 tests, busy 5 s (real-server group: 0 tests, 0 s), its last test ended at 4 s",
        "gw1: 1 tests, busy 46 s (real-server group: 1 tests, 46 s), its last test ended at 46 s (the run's critical path)",
    ]


def test_a_run_without_workers_says_nothing():
    load = WorkerLoad("servers")
    load.add("gw0", "t.py::a", "call", 1.0)
    assert load.lines() == []
