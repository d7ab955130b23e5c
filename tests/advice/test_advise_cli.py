"""`specconsole advise` against a real simulator over HTTP: the suggestion, its sentence,
the curves kept in the state dir (and used, with their age, when the server is gone), a
bad saved file refused by name and kept."""

import json
import subprocess
import sys

from server_control.advice import store
from tests.support import command_forkserver
from tests.support.advice import wait_steps


def advise(*args, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "console.cli.main", "advise", *args], capture_output=True, text=True, timeout=timeout
    )


def test_advise_suggests_from_the_curves_and_keeps_them(sim_factory, tmp_path):
    state = tmp_path / "state"
    # the simulator's short-context model: target-only wins from batch 5 (N=4); threshold 8
    sim = sim_factory(
        "--enable-metrics", "--sim-explore-share", "0.1", threshold=8, traffic="phases:s=10000,c=1-14,period=12", time_scale=20
    )
    sim.wait_ready()
    wait_steps(sim.url, steps=1500)
    got = advise("--url", sim.url, "--state-dir", str(state), "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert doc["current"] == 8 and doc["server_answered"] is True
    assert abs(doc["suggested"] - 4) <= 1, doc
    lo, hi = doc["interval"]
    assert lo <= doc["suggested"] <= hi
    assert doc["sentence"].startswith(f"N={doc['suggested']} would give +")
    assert "measured over" in doc["sentence"] and "95% interval" in doc["sentence"]
    assert {c["mode"] for c in doc["curves"]} == {"speculative", "target_only"}
    files = list((state / "advice").glob("*.json"))
    assert len(files) == 1
    text = advise("--url", sim.url, "--state-dir", str(state))
    assert text.returncode == 0 and "crossover: target-only faster from batch" in text.stdout
    assert "measured over" in text.stdout and "95% interval" in text.stdout
    assert "cold-draft mark" not in doc["sentence"]  # the draft kept warm (mark 0): nothing to say
    mark = command_forkserver.run(["setting", "cold", "1", "--url", sim.url], timeout=60)
    assert mark.returncode == 0, mark.stderr
    cold = json.loads(advise("--url", sim.url, "--state-dir", str(state), "--json").stdout)
    assert "(the cold-draft mark is 1: target-only steps above it skip the draft's extend" in cold["sentence"], cold
    assert "the best N may be lower)" in cold["sentence"] and cold["cold_draft_above"] == 1 and doc["cold_draft_above"] == 0

    sim.stop()
    gone = advise("--url", sim.url, "--state-dir", str(state), "--json")
    assert gone.returncode == 1
    later = json.loads(gone.stdout)
    assert later["server_answered"] is False and "server_info" in later["error"]
    assert later["suggested"] == doc["suggested"] or abs(later["suggested"] - doc["suggested"]) <= 1
    assert later["saved_age_s"] >= 0
    words = advise("--url", sim.url, "--state-dir", str(state))
    assert "from the curves saved" in words.stdout and "ago" in words.stdout

    files[0].write_text('{"version": 1, "saved_at": "yesterday"}')
    bad = advise("--url", sim.url, "--state-dir", str(state))
    assert bad.returncode == 2 and str(files[0]) in bad.stderr and "saved_at" in bad.stderr
    assert files[0].read_text() == '{"version": 1, "saved_at": "yesterday"}'  # nothing lost


def test_a_restarted_server_adds_to_what_was_saved(tmp_path):
    from tests.support.advice import speculative_curves as reading

    store.update("http://127.0.0.1:1", "m", reading(50), tmp_path)
    store.update("http://127.0.0.1:1", "m", reading(80), tmp_path)  # same life, later
    saved = store.update("http://127.0.0.1:1", "m", reading(10), tmp_path)  # restarted
    (b,) = saved.total().mode("speculative")
    assert b.steps == 80 + 10
    assert store.load("http://127.0.0.1:1", "m", tmp_path).total() == saved.total()
