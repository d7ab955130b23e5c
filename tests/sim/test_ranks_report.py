"""The simulator reports what the SGLang patch reports: every TP rank's live values, the
draft steps really run, the spec_disable metrics, and (``--sim-fail-build-rank``) every
rank off with the patch's own NOT active words, a refused runtime change and a failing
initialisation layer in ``specconsole verify``."""

import json
import re
import subprocess
import sys

import httpx
from prometheus_client.parser import text_string_to_metric_families

from server_control.protocol import spec_metrics

REASON = (
    "TP ranks disagree: TP1: could not build the target-only (steps=0) runtime state: "
    "RuntimeError('simulated by --sim-fail-build-rank'); ready: TP0; "
    "the switch is off on every rank"
)


def test_every_rank_and_the_patch_metrics_are_reported(sim_factory):
    sim = sim_factory("--enable-metrics", tp=2, threshold=5)
    sim.wait_ready()
    (state,) = httpx.get(sim.url + "/server_info", timeout=10).json()["internal_states"]
    live = state["dynamic_speculation"]
    assert live["active"] is True and live["reason"] is None and live["num_steps"] == 3
    assert live["tp_ranks"] == [{"rank": 0, "active": True, "reason": None}, {"rank": 1, "active": True, "reason": None}]
    assert [(r["rank"], r["threshold"], r["mode"]) for r in live["ranks"]] == [(0, 5, "speculative"), (1, 5, "speculative")]
    text = httpx.get(sim.url + "/metrics", timeout=10).text
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert (
        set(spec_metrics.NAMES)
        - {
            "sglang:spec_disable_switches_total",
            "sglang:spec_disable_decode_steps_total",
            "sglang:spec_disable_generated_tokens_total",
            "sglang:spec_disable_spec_verifies_total",
            "sglang:spec_disable_accepted_drafts_total",
            "sglang:spec_disable_proposed_drafts_total",
            "sglang:spec_disable_cold_steps_total",  # appears with the first cold step
            *spec_metrics.PATCH_ONLY,
            # per batch bucket: series appear with the first step
            "sglang:spec_disable_bucket_steps_total",
            "sglang:spec_disable_bucket_seconds_total",
            "sglang:spec_disable_bucket_tokens_total",
        }
        <= names
    )
    assert "sglang:spec_dynamic_target_only" not in names  # the ad-hoc names are gone


def test_a_rank_failing_its_build_turns_every_rank_off(sim_factory, tmp_path):
    sim = sim_factory("--sim-fail-build-rank", "1", tp=2, threshold=5)
    sim.wait_ready()
    lines = re.findall(r"(TP\d)\] Dynamic speculation disable NOT active: (.*)$", sim.log_text(), re.M)
    assert sorted(lines) == [("TP0", REASON), ("TP1", REASON)]
    (state,) = httpx.get(sim.url + "/server_info", timeout=10).json()["internal_states"]
    live = state["dynamic_speculation"]
    assert (live["active"], live["reason"]) == (False, REASON)
    assert [r["active"] for r in live["tp_ranks"]] == [True, False]
    answer = httpx.post(
        sim.url + "/set_internal_state", timeout=10, json={"server_args": {"speculative_disable_batch_threshold": 8}}
    )
    assert answer.json() == [False]
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "console",
            "verify",
            "--url",
            sim.url,
            "--json",
            "--wait",
            "3",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    layers = {x["name"]: x for x in json.loads(res.stdout)["layers"]}
    assert layers["initialisation"]["status"] == "fail", res.stdout
    assert layers["initialisation"]["cause"] == REASON
