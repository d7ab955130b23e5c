"""The resume probe's log window (rig/switching.py), against a scripted server log.

SGLang streams a request's last tokens (``stream_output``) before it logs that step's
``Decode batch`` line (``batch_result_processor.process_batch_result_decode``), so on a
loaded machine the previous request's last, speculative line (accept 3.00) can be written
after the next probe opened its window; and the overlap scheduler logs the line of the
step it launched before it received the force after the force line (that step's result is
processed after the loop iteration's receive). Counted as a target-only step, either
failed ``test_draft_is_warm_right_after_target_only`` in a full-suite run ("3.0 inside
the target-only stretch"; the second on CI's machine). The probe reads from its own
request's ``Prefill batch`` line after the force line: the request is sent once the force
was answered, so it is received at a later loop iteration than the force, after every
earlier step's line was written.
"""

from __future__ import annotations

import threading
import time

import pytest

from server_control.protocol import decision
from tests.real_sglang.rig import switching as sw


def _decode(accept: float) -> str:
    return (
        f"[t] Decode batch, #running-req: 1, #token: 40, token usage: 0.01, "
        f"accept len: {accept:.2f}, gen throughput (token/s): 10.00\n"
    )


class ScriptedServer:
    """Answers what resume_probe sends; its log gets the previous request's last line
    late (right after the probe opened its window), then this request's steps."""

    def __init__(self, late_after_force: bool) -> None:
        self.log = [_decode(3.0)] * 3  # an earlier, speculative request
        self.late_after_force = late_after_force
        self.mode = decision.AUTO
        self.lock = threading.Lock()
        self.late_line_written = False

    def log_text(self) -> str:
        with self.lock:
            return "".join(self.log)

    def log_tail(self, n: int = 30) -> str:
        return self.log_text()[-2000:]

    def _append(self, line: str) -> None:
        with self.lock:
            self.log.append(line)

    def request(self, path: str, body: dict, timeout: float = 120):
        if path == "/set_internal_state":
            mode = decision.FORCE_CHOICES[body["server_args"][decision.FORCE_KEY]]
            late = not self.late_line_written  # the earlier request's last step, logged late
            self.late_line_written = True
            if late and not self.late_after_force:
                self._append(_decode(3.0))
            self._append(f"[t] Dynamic speculation: force mode set to {mode}\n")
            if late and self.late_after_force:  # the overlap scheduler: the step launched before
                self._append(_decode(3.0))
            self.mode = mode
            return [True]
        assert path == "/generate"
        self._append("[t] Prefill batch, #new-seq: 1, #new-token: 3, #cached-token: 0, token usage: 0.00\n")
        switched = False
        for _ in range(body["sampling_params"]["max_new_tokens"]):
            if self.mode == decision.SPECULATIVE and not switched:
                self._append(f"[t] {sw.TO_SPECULATIVE} (forced)\n")
                switched = True
            self._append(_decode(3.0 if switched else 1.0))
            time.sleep(0.002)
        return [{"output_ids": [5] * body["sampling_params"]["max_new_tokens"]}]


@pytest.mark.parametrize("late_after_force", [False, True], ids=["before-the-force-line", "after-the-force-line"])
def test_a_late_line_of_the_previous_request_is_not_a_target_only_step(late_after_force):
    probe = sw.resume_probe(ScriptedServer(late_after_force), [2, 3, 4], stretch_steps=6, max_new=40)
    assert probe.during and set(probe.during) == {1.0}, probe.during
    assert probe.after[sw.RESUME_SKIP :] and set(probe.after) == {3.0}, probe.after
