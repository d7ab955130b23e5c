"""Fail mode on the real server: the version gate says no (a faked sglang 0.5.22), yet the
threshold flags parse, the server starts with the switch off and serves, the reason is in
one NOT active line at start-up, in /server_info, in a refused runtime change and in
``specconsole verify`` (initialisation layer)."""

from __future__ import annotations

import json
import re

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG, cli_server
from tests.real_sglang.rig.constant_pair import assert_every_draft_accepted
from tests.support.wait import wait_for

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
REASON = "sglang 0.5.22 is not the supported 0.5.23; the patch is gated to that exact version"
PRELOAD = "tests.real_sglang.rig.preload,tests.real_sglang.fake_sglang_version"


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    with cli_server(
        rig,
        tmp_path_factory.mktemp("failmode"),
        "fail mode (faked sglang version) server via specconsole launch",
        threshold=2,
        name="rig-failmode",
        env={"SPECCONSOLE_SGLANG_PRELOAD": PRELOAD},
    ) as run:
        yield run


def test_the_server_starts_with_the_flags_and_says_why_the_switch_is_off(run):
    log = run.server.log_text()
    not_active = [ln for ln in log.splitlines() if "Dynamic speculation disable NOT active" in ln]
    assert not_active and all(ln.endswith("NOT active: " + REASON) for ln in not_active), not_active
    ready = log.index("The server is fired up and ready to roll!")
    assert log.index("NOT active: " + REASON) < ready  # said at start-up, not at exit
    assert not re.search(r"Dynamic speculation disable enabled|switched to", log)
    info = run.server.request("/server_info")
    assert info["speculative_disable_batch_threshold"] == 2  # the flag parsed
    (state,) = info["internal_states"]
    assert state["dynamic_speculation"] == {"enabled": False, "active": False, "reason": REASON}


def test_concurrency_1_accepts_every_draft(run, rig):
    """SGLang's own EAGLE-3 with the patch gated off, as the rig's unpatched server
    (test_plain_eagle3.py, heavy tier): the constant target's token every time, every
    draft accepted (2 steps: 3.00) by the request, the decode lines and /server_info."""
    assert_every_draft_accepted(run.server, rig.constant_token_id)


def test_it_serves_plain_speculation_above_the_threshold(run):
    for out in run.server.generate_batch(6, 31):
        meta = out["meta_info"]
        assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(3.0)


def test_a_runtime_change_is_refused_with_the_reason(run):
    """The refusal is answered at once; its log line reaches the run's log through the
    keeper's copy of the server's output (a pipe), so it is waited for (a loaded fresh clone
    read the log between the answer and the copy)."""
    assert run.server.request("/set_internal_state", {"server_args": {"speculative_disable_batch_threshold": 8}}) == [False]
    line = f"refused speculative_disable_batch_threshold=8: dynamic speculation disable is not active on this rank ({REASON})"
    wait_for(lambda: line in run.server.log_text(), 30, 0.1, what=f"the refusal in the run's log: {line}")


def test_verify_names_the_reason_in_the_initialisation_layer(run):
    res = run.cli("verify", "--json", "--wait", "5")
    result = json.loads(res.stdout)
    layers = {layer["name"]: layer for layer in result["layers"]}
    assert result["summary"] == "fail" and res.returncode == 1
    assert layers["initialisation"]["status"] == "fail"
    assert layers["initialisation"]["cause"] == REASON
