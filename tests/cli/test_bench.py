"""`specconsole bench` against a real simulator process."""
import json
import subprocess
import sys

import httpx

from server_control import decision
from tests.support.sim import REPO_ROOT


def bench(*argv):
    return subprocess.run([sys.executable, "-m", "console", "bench", *argv], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)


def test_bench_command_sweeps_both_modes_and_restores_auto(sim_factory):
    sim = sim_factory().wait_ready()
    r = bench("--url", sim.url, "--levels", "1,8", "--warmup", "0.3", "--measure", "1", "--max-tokens", "64", "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert set(result["per_mode"]) == {decision.SPECULATIVE, decision.TARGET_ONLY}
    assert all(row["tokens"] > 0 for rows in result["per_mode"].values() for row in rows)
    assert "crossover" in result and "suggested_threshold" in result
    assert httpx.get(sim.url + "/server_info").json()["internal_states"][0][decision.FORCE_KEY] == decision.AUTO


def test_bench_command_rejects_bad_levels():
    r = bench("--url", "http://127.0.0.1:9", "--levels", "0,x")
    assert r.returncode == 2 and "--levels" in r.stderr


def test_bench_command_reports_an_unreachable_server():
    with __import__("socket").socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        r = bench("--url", f"http://127.0.0.1:{port}", "--levels", "1", "--warmup", "0.1", "--measure", "0.3")
    assert r.returncode == 1
    assert "benchmark failed" in r.stderr
