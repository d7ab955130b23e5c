"""``--speculative-adaptive`` together with the threshold on the real server (tp 1, threshold 2,
constant models: every draft accepted).

SGLang's adaptive controller runs one slot for every batch size (a config file: candidate
steps [1, 2], starting at 2). At or below N the controller decides (2 steps: accept length
3.00); above N the patch forces target-only (1.00). The forced steps accept no draft; had
they fed the controller, its slot's EMA would fall below its drop mark during the burst and
it would pick 1 step (accept length 2.00 after the burst). So after the burst concurrency 1
must speculate at 3.00 again, and SGLang must never have switched the controller to 1 step.
Negative control (run by hand: ``on_verified`` in sglang_patch/worker.py made to feed forced
steps too): the last test fails, concurrency 1 after the burst accepting 2.58.
The tests run in file order against one server.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG, cli_server

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(900)]
TOKENS_C1 = 31
TOKENS_C6 = 61  # 60 decode steps, all forced target-only: far more than the slot's updates
SLOT = {
    "candidate_steps": [1, 2],
    "warmup_batches": 2,
    "update_interval": 2,
    "down_hysteresis": 0.0,
}  # drops to 1 step once its EMA of accepted drafts <= 0.5


def _accept_length(meta: dict) -> float:
    assert meta["spec_verify_ct"] > 0, meta
    return 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"]


def _live(run) -> dict:
    (state,) = run.server.request("/server_info")["internal_states"]
    return state["dynamic_speculation"]


@pytest.fixture(scope="module")
def run(rig, tmp_path_factory):
    work = tmp_path_factory.mktemp("adaptive")
    config = work / "adaptive.json"
    config.write_text(json.dumps({"1": SLOT}))
    with cli_server(
        rig,
        work,
        "adaptive + threshold server via specconsole launch",
        threshold=2,
        name="rig-adaptive",
        extra_args=("--speculative-adaptive", "--speculative-adaptive-config", str(config)),
    ) as run:
        yield run


def test_the_switch_is_active_with_the_adaptive_controller(run):
    log = run.server.log_text()
    assert "Dynamic speculation disable enabled: threshold=2" in log
    assert "NOT active" not in log and "speculative_adaptive disabled" not in log
    live = _live(run)
    assert live["active"] is True and live["num_steps"] == 2


def test_concurrency_1_runs_the_controllers_two_steps(run):
    out = run.server.generate("the quick brown fox", TOKENS_C1)
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0)
    assert _live(run)["mode"] == "speculative"


def test_concurrency_6_is_forced_target_only(run):
    start = len(run.server.log_text())
    for out in run.server.generate_batch(6, TOKENS_C6):
        assert out["meta_info"]["completion_tokens"] == TOKENS_C6
        assert out["meta_info"]["spec_num_correct_drafts"] == 0, out["meta_info"]
    assert re.search(r"switched to target-only \(decode batch \d+ > threshold 2\)", run.server.log_text()[start:])
    live = _live(run)
    assert (live["mode"], live["num_steps"]) == ("target_only", 0)
    assert live["steps"]["target_only"] >= TOKENS_C6 - 1


def test_after_the_burst_the_controller_was_not_fed_the_forced_steps(run):
    out = run.server.generate("the quick brown fox", TOKENS_C1)
    assert _accept_length(out["meta_info"]) == pytest.approx(3.0), out["meta_info"]
    live = _live(run)
    assert (live["mode"], live["num_steps"]) == ("speculative", 2)
    # SGLang logs each of its controller's step changes; it never went to 1 step
    assert not re.search(r"Switch adaptive runtime state: steps \d+ -> 1,", run.server.log_text())
