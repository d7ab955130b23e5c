"""`specconsole bench` against a real simulator process."""

import json

import httpx

from server_control.protocol import decision
from tests.support import command_forkserver
from tests.support.sim import CLIENT_WINDOW_TIME_SCALE, REPO_ROOT


def bench(*argv):
    return command_forkserver.run(["bench", *argv], cwd=REPO_ROOT, timeout=120)


def test_bench_command_sweeps_both_modes_and_restores_auto(sim_factory):
    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
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


def test_bench_reads_the_patch_metrics_when_the_server_publishes_them(sim_factory):
    sim = sim_factory("--enable-metrics", time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
    r = bench("--url", sim.url, "--levels", "8", "--warmup", "0.5", "--measure", "2", "--max-tokens", "64", "--json")
    assert r.returncode == 0, r.stderr
    per_mode = json.loads(r.stdout)["per_mode"]
    spec, target = per_mode[decision.SPECULATIVE][0]["server"], per_mode[decision.TARGET_ONLY][0]["server"]
    assert spec["target_only_share"] == 0 and spec["decode_steps"][decision.SPECULATIVE] > 0
    assert spec["accept_length"] > 1.5  # the simulator's acceptance, over speculative steps only
    assert target["target_only_share"] == 1 and target["accept_length"] is None
    text = bench(
        "--url", sim.url, "--levels", "8", "--modes", "target_only", "--warmup", "0.5", "--measure", "1", "--max-tokens", "64"
    )
    assert "server c=8 target_only: 100% of decode steps target-only" in text.stdout, text.stdout


def test_bench_without_metrics_says_nothing_of_the_server(sim_factory):
    sim = sim_factory(time_scale=CLIENT_WINDOW_TIME_SCALE).wait_ready()
    r = bench(
        "--url",
        sim.url,
        "--levels",
        "2",
        "--modes",
        "speculative",
        "--warmup",
        "0.2",
        "--measure",
        "0.5",
        "--max-tokens",
        "32",
        "--json",
    )
    assert json.loads(r.stdout)["per_mode"][decision.SPECULATIVE][0]["server"] is None


def test_bench_command_rejects_bad_rounds():
    r = bench("--url", "http://127.0.0.1:9", "--rounds", "0")
    assert r.returncode == 2 and "rounds must be an integer from 1 to 50, got '0'" in r.stderr
