"""Tensor parallel 2 on the CPU (gloo): both ranks load the patch and switch together.

Same launch path as test_patched_e2e.py (``specconsole launch`` on a rig profile), with
``tp_size = 2``. Every rank writes its own log lines with its ``TPr`` prefix.
"""
from __future__ import annotations

import re
import time

import pytest

from tests.real_sglang.conftest import SERVER_LIFETIME_S, SKIP_NO_SGLANG, report
from tests.real_sglang.rig.profiles import CliRun, specconsole
from tests.real_sglang.rig.server import rss_mb

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
TOKENS = 31


def _ranks(text: str, needle: str) -> set[str]:
    """The TP ranks (e.g. {'TP0', 'TP1'}) that logged a line containing ``needle``."""
    return {m.group(1) for m in re.finditer(r"^\[[^\]]* (TP\d+)\] (.*)$", text, re.M)
            if needle in m.group(2)}


@pytest.fixture(scope="module")
def tp2(rig, tmp_path_factory):
    t0 = time.monotonic()
    run = CliRun(rig, tmp_path_factory.mktemp("tp2"), tp=2, threshold=2,
                 lifetime_s=SERVER_LIFETIME_S, name="rig-tp2")
    try:
        run.server.wait_ready(timeout_s=120)
        rss = rss_mb(run.server.processes())
        report("tp 2 server via specconsole launch", ready_s=time.monotonic() - t0,
               processes=len(rss), rss_total_mb=sum(rss.values()))
        yield run.server, run.profile, run.state_dir
    finally:
        assert run.close() == []


def test_both_ranks_log_the_init_line(tp2):
    server, _, _ = tp2
    assert _ranks(server.log_text(), "Dynamic speculation disable enabled: threshold=2") == {
        "TP0", "TP1"}


def test_concurrency_1_speculates_on_tp2(tp2):
    server, _, _ = tp2
    meta = server.generate("the quick brown fox", TOKENS)["meta_info"]
    assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)


def test_both_ranks_switch_together_and_back(tp2):
    """After the c=1 test the dwell is served, so c=6 runs target-only from its first step."""
    server, _, _ = tp2
    start = len(server.log_text())
    t0 = time.monotonic()
    outs = server.generate_batch(6, TOKENS)
    report("tp 2: c=6 x 31 tokens (target-only)", seconds=time.monotonic() - t0)
    assert all(o["meta_info"]["spec_num_correct_drafts"] == 0 for o in outs)
    log = server.log_text()[start:]
    assert _ranks(log, "switched to target-only (decode batch ") == {"TP0", "TP1"}
    start = len(server.log_text())
    out = server.generate("the lazy dog", TOKENS)
    meta = out["meta_info"]
    assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)
    assert _ranks(server.log_text()[start:], "switched to speculative") == {"TP0", "TP1"}


def test_runtime_threshold_change_reaches_both_ranks(tp2):
    server, profile, state = tp2
    res = specconsole(["threshold", "8", "--profile", str(profile), "--json"], state)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert _ranks(server.log_text(), "Dynamic speculation: threshold changed 2 -> 8") == {
        "TP0", "TP1"}
    res = specconsole(["stop", "--profile", str(profile), "--json"], state, timeout=120)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert server.processes() == []
