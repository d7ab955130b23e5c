"""The rig's constant pair served by SGLang's own EAGLE-3 (test rig only): one c=1 request
returns the target's constant token every time and every draft is accepted (2 steps:
accept length 3.00) in the request, in every decode line and in ``/server_info``. The same
check on the unpatched server (test_plain_eagle3.py, heavy tier) and on the fail-mode one
(test_patched_failmode.py, CI)."""

from __future__ import annotations

import pytest

from .server import RigServer

STEPS_PLUS_BONUS = 3.0  # accepted drafts per verify + the bonus token, every draft accepted


def assert_every_draft_accepted(server: RigServer, token_id: int, tokens: int = 31) -> None:
    start = len(server.log_text())
    out = server.generate("the quick brown fox", max_new_tokens=tokens)
    meta = out["meta_info"]
    assert out["output_ids"] == [token_id] * tokens
    assert meta["spec_verify_ct"] > 0
    assert 1 + meta["spec_num_correct_drafts"] / meta["spec_verify_ct"] == pytest.approx(STEPS_PLUS_BONUS)
    decodes = server.decode_lines(start)
    assert decodes, f"no Decode batch line in the log:\n{server.log_tail()}"
    assert all(acc == pytest.approx(STEPS_PLUS_BONUS) for _, acc in decodes), decodes
    info = server.request("/server_info")
    assert info["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(STEPS_PLUS_BONUS)
