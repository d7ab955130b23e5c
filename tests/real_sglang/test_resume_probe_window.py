"""The resume probe's log window (rig/switching.py), against a scripted server log.

SGLang streams a request's last tokens (``stream_output``) before it logs that step's
``Decode batch`` line (``batch_result_processor.process_batch_result_decode``), so on a
loaded machine the previous request's last, speculative line (accept 3.00) can be written
after the next probe opened its window. Counted as a target-only step, it failed
``test_draft_is_warm_right_after_target_only`` once in a full-suite run ("3.0 inside the
target-only stretch"). The probe now reads from the scheduler's own "force mode set to
target_only" line, logged between steps, after every earlier step's line.
"""

from __future__ import annotations

import threading
import time

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

    def __init__(self) -> None:
        self.log = [_decode(3.0)] * 3  # an earlier, speculative request
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
            if not self.late_line_written:  # the earlier request's last step, logged late
                self._append(_decode(3.0))
                self.late_line_written = True
            self._append(f"[t] Dynamic speculation: force mode set to {mode}\n")
            self.mode = mode
            return [True]
        assert path == "/generate"
        switched = False
        for _ in range(body["sampling_params"]["max_new_tokens"]):
            if self.mode == decision.SPECULATIVE and not switched:
                self._append(f"[t] {sw.TO_SPECULATIVE} (forced)\n")
                switched = True
            self._append(_decode(3.0 if switched else 1.0))
            time.sleep(0.002)
        return [{"output_ids": [5] * body["sampling_params"]["max_new_tokens"]}]


def test_a_late_line_of_the_previous_request_is_not_a_target_only_step():
    probe = sw.resume_probe(ScriptedServer(), [2, 3, 4], stretch_steps=6, max_new=40)
    assert probe.during and set(probe.during) == {1.0}, probe.during
    assert probe.after[sw.RESUME_SKIP :] and set(probe.after) == {3.0}, probe.after
