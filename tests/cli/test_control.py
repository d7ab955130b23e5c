"""`specconsole status`, `threshold` and `verify` as real subprocesses, with exit codes."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from server_control.protocol import decision
from tests.cli.status_schema import CHANGE, RUN, RUN_SUPERVISED, problems, snapshot_schema
from tests.control.conftest import start_stand
from tests.support import command_forkserver
from tests.support.sim import REPO_ROOT, free_port, start_sim
from tests.support.wait import wait_for


def cli(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    return command_forkserver.run(args, timeout=timeout, cwd=REPO_ROOT, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def wave_sim(tmp_path_factory):
    handle = start_sim(
        tmp_path_factory.mktemp("cmd"), "--decode-log-interval", "10", tp=2, threshold=5, traffic="wave:12:20", lifetime=180
    )
    sim = handle.wait_ready()
    # The tests below read a switch and decode lines from this log: ready is not yet "switched"
    # (a loaded CI machine ran `status` before the wave's first crossing and saw no switch).
    wait_for(lambda: decision.SWITCH_PREFIX.encode() in sim.log_path.read_bytes(), 60, what="the wave's first switch")
    wait_for(lambda: b"Decode batch" in sim.log_path.read_bytes(), 60, what="a decode line")
    yield sim
    handle.stop()


def test_status_json(wave_sim):
    r = cli("status", "--url", wave_sim.url, "--log", str(wave_sim.log_path), "--json")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert problems(snap, snapshot_schema(RUN)) == []
    assert snap["switches"], "the sim switched before this ran: the log and the poll both had it"
    assert snap["verify"]["layers"] and snap["series"]["batch"], (snap["verify"], snap["series"])  # not vacuous
    assert snap["server"]["reachable"] is True and snap["spec"]["threshold"] in (5, 7)
    assert snap["gpus"]["available"] is False and snap["logs"]["total"] > 0


def test_status_says_what_n_counts(wave_sim):
    """Issue 31 item 4: N and the batch count raw decode requests (SGLang's adaptive pads to a
    graph size first); the JSON names the unit, the text says it beside N."""
    r = cli("status", "--url", wave_sim.url, "--json")
    assert json.loads(r.stdout)["spec"]["threshold_counts"] == "decode_requests", r.stdout[:400]
    text = cli("status", "--url", wave_sim.url).stdout
    line = next(x for x in text.splitlines() if x.startswith("speculation:"))
    assert " decode requests (back at <= " in line, line
    assert "never padded to a CUDA-graph size" in " ".join(cli("threshold", "--help").stdout.split())


def test_status_shows_the_cold_draft_mark_and_its_cold_steps(wave_sim):
    """`setting cold M` and status: the mark and the server's cold-step count, as JSON and as
    text; at 0 the text says the draft is kept warm. The wave crosses N=5 up to 12 a batch."""
    warm = json.loads(cli("status", "--url", wave_sim.url, "--json").stdout)["spec"]
    assert warm["cold_draft_above"] == 0 and warm["cold_steps"] == 0, warm
    assert "draft cold never (kept warm), 0 cold steps" in cli("status", "--url", wave_sim.url).stdout
    r = cli("setting", "cold", "6", "--url", wave_sim.url, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "applied", r.stdout + r.stderr
    try:
        spec = wait_for(
            lambda: (s := json.loads(cli("status", "--url", wave_sim.url, "--json").stdout)["spec"])["cold_steps"] and s,
            90,
            0.5,
            what="a cold step counted by the server",
        )
        assert spec["cold_draft_above"] == 6 and spec["cold_steps"] > 0
        line = next(x for x in cli("status", "--url", wave_sim.url).stdout.splitlines() if x.startswith("speculation:"))
        assert "draft cold above 6, " in line and " cold steps" in line, line
    finally:
        assert cli("setting", "cold", "0", "--url", wave_sim.url).returncode == 0


def test_schema_check_catches_a_missing_key_a_reorder_and_a_wrong_type():
    change = {"requested": 6, "state": "applied", "detail": "", "ranks": [True], "key": "speculative_disable_batch_threshold"}
    assert problems(change, CHANGE) == []
    assert problems({k: v for k, v in change.items() if k != "detail"}, CHANGE)
    assert problems(dict(reversed(change.items())), CHANGE)
    assert problems({**change, "ranks": ["yes"]}, CHANGE)
    assert problems({**change, "requested": True}, CHANGE)


def test_verify_passes_under_traffic(wave_sim):
    r = cli("verify", "--url", wave_sim.url, "--log", str(wave_sim.log_path), "--wait", "60", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["summary"] == "pass" and [x["status"] for x in result["layers"]] == ["pass"] * 3


def test_threshold_set_read_and_refuse(wave_sim):
    r = cli("threshold", "7", "--url", wave_sim.url, "--log", str(wave_sim.log_path), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["state"] == "applied"
    assert problems(json.loads(r.stdout), CHANGE) == []
    r = cli("threshold", "--url", wave_sim.url, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["thresholds"] == [7]
    r = cli("threshold", "--url", wave_sim.url, "--", "-1")  # a bad N is a bad argument: 2
    assert r.returncode == 2 and "refused" in r.stderr and ">= 0" in r.stderr, r.stdout + r.stderr
    for bad in ("lots", "８", "１２"):  # full-width digits too
        r = cli("threshold", bad, "--url", wave_sim.url)
        assert r.returncode == 2 and "must be an integer" in r.stderr, (bad, r.stdout + r.stderr)
    r = cli("threshold", "--force", "sometimes", "--url", wave_sim.url)
    assert r.returncode == 2 and "must be one of auto, speculative, target_only" in r.stderr
    r = cli("threshold", "5", "--url", wave_sim.url)
    assert r.returncode == 0 and r.stdout.startswith("applied")


def test_no_answer_is_exit_5_on_every_command():
    """One documented code for "nothing answered at the URL" (status said 1, verify 3
    "pending", threshold 1): a script can tell it from a refusal or a failure."""
    url = f"http://127.0.0.1:{free_port()}"
    r = cli("status", "--url", url, "--json")
    assert r.returncode == 5
    assert problems(json.loads(r.stdout), snapshot_schema(RUN)) == []
    assert "/server_info" in json.loads(r.stdout)["server"]["error"]
    r = cli("verify", "--url", url)
    assert r.returncode == 5 and "pending" in r.stdout and "no answer from" in r.stderr
    for args in (("threshold",), ("threshold", "7"), ("threshold", "--force", "auto")):
        r = cli(*args, "--url", url)
        assert r.returncode == 5 and "no answer from" in r.stderr, (args, r.stdout, r.stderr)


def test_verify_fails_when_threshold_is_zero(tmp_path):
    with start_sim(tmp_path, tp=1, threshold=0, lifetime=60) as sim:
        sim.wait_ready()
        r = cli("verify", "--url", sim.url, "--log", str(sim.log_path), "--json")
    assert r.returncode == 1, r.stdout
    cfg = json.loads(r.stdout)["layers"][0]
    assert cfg["status"] == "fail" and "threshold 0" in cfg["cause"]


def test_threshold_against_stock_sglang(tmp_path):
    stand = start_stand(tmp_path, "stock")
    try:
        r = cli("threshold", "6", "--url", stand.url, "--log", str(stand.log_path))
    finally:
        stand.stop()
    assert r.returncode == 1
    assert "this server does not support runtime threshold changes" in r.stdout


def test_bad_arguments_exit_2():
    r = cli("status", "--url", f"127.0.0.1:{free_port()}")  # no scheme: refused before any request
    assert r.returncode == 2 and "http://" in r.stderr
    r = cli("verify", "--log", "x.log", "--profile", "demo")
    assert r.returncode == 2 and "--log goes with --url" in r.stderr
    r = cli("status", "--profile", "/nonexistent/p.toml")
    assert r.returncode == 2 and "p.toml" in r.stderr


def test_profile_status_after_launch(sim_profile):
    r = cli("launch", "--profile", str(sim_profile), "--wait", "60")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        r = cli("status", "--profile", str(sim_profile), "--json")
        assert r.returncode == 0, r.stderr
        snap = json.loads(r.stdout)
        assert problems(snap, snapshot_schema(RUN_SUPERVISED)) == []
        assert snap["run"]["state"] == "ready" and snap["run"]["pid"] and snap["attached"] is False
        assert snap["logs"]["path"] == snap["run"]["log_path"]
        r = cli("verify", "--profile", str(sim_profile), "--wait", "60")
        assert r.returncode == 0, r.stdout
    finally:
        assert cli("stop", "--profile", str(sim_profile)).returncode == 0


def test_threshold_needs_the_admin_key(tmp_path):
    with start_sim(tmp_path, "--admin-api-key", "s3cret", tp=1, threshold=5, lifetime=60) as sim:
        sim.wait_ready()
        r = cli("threshold", "6", "--url", sim.url, "--admin-api-key-env", "NO_SUCH_VAR_FOR_TEST")
        assert r.returncode == 1 and "not authorised" in r.stdout, r.stdout
        r = cli("threshold", "6", "--url", sim.url, "--admin-api-key-env", "TEST_ADMIN", env={"TEST_ADMIN": "s3cret"})
        assert r.returncode == 0 and r.stdout.startswith("applied"), r.stdout


def test_no_answer_is_nothing_answering_not_a_wrong_answer():
    """Exit 5 is for refused, unreachable or timed out; a server that answered wrongly (too
    large, an HTTP error, bad JSON) is a failure, 1 (the hostile server's tests)."""
    import httpx

    from server_control.net.http import AnswerTooLarge, describe_error, no_answer

    url = "http://127.0.0.1:9/server_info"
    assert no_answer(describe_error(httpx.ConnectError("refused"), url))
    assert no_answer(describe_error(httpx.ReadTimeout("slow"), url))
    request = httpx.Request("GET", url)
    assert not no_answer(describe_error(AnswerTooLarge("answer too large (over 8 bytes)", request=request), url))
    assert not no_answer(f"{url}: HTTP 500") and not no_answer(None) and not no_answer("")
