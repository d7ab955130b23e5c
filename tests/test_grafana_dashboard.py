"""The shipped Grafana dashboard plots what the patch publishes: every sglang: metric its
queries name exists (the patch's own, from server_control/protocol/spec_metrics.py, or SGLang's),
and mode, N and the decode batch are there."""

import json
import re
from pathlib import Path

from server_control.protocol import spec_metrics

DASHBOARD = Path(__file__).resolve().parents[1] / "assets" / "grafana-dynamic-speculation.json"
SGLANG_OWN = {"sglang:num_running_reqs", "sglang:spec_accept_length"}


def expressions() -> list[str]:
    doc = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in doc["panels"] for t in p["targets"]]


def test_every_queried_metric_exists():
    named = {m for e in expressions() for m in re.findall(r"sglang:[a-z_]+", e)}
    assert named - SGLANG_OWN <= set(spec_metrics.NAMES), named - SGLANG_OWN - set(spec_metrics.NAMES)
    assert {"sglang:spec_disable_mode", "sglang:spec_disable_batch_threshold", "sglang:num_running_reqs"} <= named


def test_panels_have_unique_ids_and_ref_ids():
    doc = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for p in doc["panels"]:
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)) and p["datasource"]["uid"] == "${datasource}"
