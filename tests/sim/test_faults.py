"""Fault injection, process model and bounded lifetime, with real processes and signals."""

import os
import signal
import time

import httpx
import pytest


def poll(predicate, timeout=60.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")


def status(url):
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


def test_crash_exits_non_zero_with_scheduler_traceback(sim_factory):
    sim = sim_factory("--sim-crash-after", "2", traffic="steady:4")
    sim.wait_ready()
    code = poll(lambda: sim.proc.poll() is not None and sim.proc.returncode or None)
    assert code == 1
    log = sim.log_text()
    assert "TP0] Scheduler hit an exception: Traceback (most recent call last):" in log
    assert "RuntimeError: CUDA error" in log
    assert "Received sigquit from a child process" in log
    poll(lambda: not sim.group_alive(), timeout=20)


def test_health_starts_failing_with_503(sim_factory):
    sim = sim_factory("--sim-health-fail-after", "4")
    sim.wait_for_log("The server is fired up and ready to roll!")  # health may already fail
    poll(lambda: status(sim.url + "/health") == 503)
    assert status(sim.url + "/health_generate") == 503
    assert status(sim.url + "/ready") == 503
    assert status(sim.url + "/v1/loads") == 200  # the server itself still answers


def test_health_can_stop_answering(sim_factory):
    sim = sim_factory("--sim-health-fail-after", "1", "--sim-health-fail-mode", "hang")
    sim.wait_for_log("The server is fired up and ready to roll!")

    def hangs():
        try:
            httpx.get(sim.url + "/health", timeout=0.5)
        except httpx.ReadTimeout:
            return True
        return False

    poll(hangs)


def test_slow_start_answers_503_until_ready(sim_factory):
    sim = sim_factory("--sim-slow-start", "60")  # 3 s of wall clock at time scale 20
    poll(lambda: status(sim.url + "/health") == 503)
    assert httpx.post(sim.url + "/generate", json={"text": "x"}).status_code == 503
    sim.wait_ready()
    log = sim.log_text()
    assert log.index("Uvicorn running on http://127.0.0.1:") < log.index("The server is fired up")


def test_http_5xx_rate(sim_factory):
    sim = sim_factory("--sim-http-5xx-rate", "1")
    sim.wait_ready()
    r = httpx.post(sim.url + "/v1/completions", json={"prompt": "p", "max_tokens": 2})
    assert r.status_code == 500 and r.json()["code"] == 500
    assert status(sim.url + "/health") == 200


def test_killed_parent_leaves_ranks_as_orphans_until_group_signal(sim_factory):
    sim = sim_factory()
    sim.wait_ready()
    os.kill(sim.proc.pid, signal.SIGKILL)
    sim.proc.wait(timeout=10)
    sim.wait_for_log("Scheduler lost its connection to the main process", count=2)
    orphans = sim.group_pids()
    assert len(orphans) >= 2  # both TP ranks (plus multiprocessing's resource tracker)
    os.killpg(sim.pgid, signal.SIGTERM)
    poll(lambda: not sim.group_alive(), timeout=20)


def test_sigterm_to_the_group_stops_everything(sim_factory):
    sim = sim_factory()
    sim.wait_ready()
    assert len(sim.group_pids()) >= 3
    sim.stop()
    assert sim.proc.returncode is not None
    assert not sim.group_alive()


@pytest.mark.parametrize("lifetime", [4])
def test_bounded_lifetime_ends_every_process(sim_factory, lifetime):
    sim = sim_factory(lifetime=lifetime)
    sim.wait_ready()
    poll(lambda: sim.proc.poll() is not None, timeout=lifetime + 30)
    assert sim.proc.returncode == 0
    assert "--sim-max-lifetime" in sim.log_text()
    poll(lambda: not sim.group_alive(), timeout=20)
