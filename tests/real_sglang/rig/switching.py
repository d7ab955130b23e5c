"""Drive a patched rig server through mode switches while requests run (test rig only).

Everything is read from outside, as an operator would: ``/generate`` with token ids,
``/set_internal_state`` for the forced mode, and the server's log, which (with
``--decode-log-interval 1``) has one ``Decode batch`` line per decode step with that
step's accept length, and the patch's ``switched to ...`` line at the step a switch
takes effect.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

from server_control.protocol import decision

from .server import DECODE_RE, RigServer

TO_TARGET_ONLY = "Dynamic speculation: switched to target-only"
TO_SPECULATIVE = "Dynamic speculation: switched to speculative"
FORCED_TARGET_ONLY = f"Dynamic speculation: force mode set to {decision.TARGET_ONLY}"
PREFILL = "Prefill batch"
WARM_FLOOR = 2.0  # mean accept length right after resuming, warm draft KV (max 3.00)
RESUME_SKIP = 1  # the first line after a switch may still report the step before it
RESUME_WINDOW = 5  # steps judged after resuming (a cold draft needs ~PERIOD positions)


def force(server: RigServer, mode: str) -> None:
    """Set the forced mode on every rank (HTTP carries it as its index in FORCE_CHOICES)."""
    res = server.request("/set_internal_state", {"server_args": {decision.FORCE_KEY: decision.FORCE_CHOICES.index(mode)}})
    assert res and all(x is True for x in res), f"force {mode} refused: {res}"


def set_threshold(server: RigServer, n: int) -> None:
    res = server.request("/set_internal_state", {"server_args": {decision.THRESHOLD_KEY: n}})
    assert res and all(x is True for x in res), f"threshold {n} refused: {res}"


def _greedy(max_new: int) -> dict:
    return {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True}


def _generate(server: RigServer, prompts: list[list[int]], params: dict | list[dict], timeout: float) -> list[list[int]]:
    out = server.request("/generate", {"input_ids": prompts, "sampling_params": params}, timeout=timeout)
    return [o["output_ids"] for o in out]


def generate_ids(server: RigServer, prompts: list[list[int]], max_new: int, timeout: float = 600) -> list[list[int]]:
    """Greedy outputs (token ids) of ``prompts``, sent as ONE batch request."""
    return _generate(server, prompts, _greedy(max_new), timeout)


def generate_each(server: RigServer, prompts: list[list[int]], lengths: list[int], timeout: float = 600) -> list[list[int]]:
    """Greedy outputs of ``prompts``, ``lengths[i]`` new tokens for prompt i, sent as ONE
    batch request: they reach the scheduler together, whatever the client's load."""
    return _generate(server, prompts, [_greedy(n) for n in lengths], timeout)


class LogWindow:
    """The server log from now on."""

    def __init__(self, server: RigServer) -> None:
        self.server = server
        self.start = len(server.log_text())

    def text(self) -> str:
        return self.server.log_text()[self.start :]

    def decodes(self) -> list[float]:
        return [float(m.group(2)) for m in DECODE_RE.finditer(self.text())]

    def wait(self, predicate, what: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not seen after {timeout:.0f} s\n{self.server.log_tail(30)}")
            time.sleep(0.02)


class Background:
    """``fn()`` in a thread; ``result()`` joins and re-raises its exception."""

    def __init__(self, fn) -> None:
        self._out: dict = {}

        def run():
            try:
                self._out["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 - re-raised in result()
                self._out["error"] = exc

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def result(self, timeout: float = 600):
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise TimeoutError("request still running")
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


@dataclass(frozen=True)
class ResumeProbe:
    """One request that ran target-only (forced), then speculative (forced)."""

    output_ids: list[int]
    during: list[float]  # accept lengths while target-only
    after: list[float]  # accept lengths from the switch back on

    def warm_mean(self) -> float:
        """Mean accept length of the steps judged after resuming."""
        judged = self.after[RESUME_SKIP : RESUME_SKIP + RESUME_WINDOW]
        assert len(judged) == RESUME_WINDOW, f"too few steps after resuming: {self.after}"
        return sum(judged) / len(judged)


def resume_probe(
    server: RigServer, prompt: list[int], *, stretch_steps: int = 36, max_new: int = 110, copies: int = 1
) -> ResumeProbe:
    """Run ``prompt`` alone (``copies`` of it as one batch), forced target-only from its first
    decode step; once ``stretch_steps`` steps ran, force speculative until it ends; back to
    auto after. (One timed action, and a late one only lengthens the stretch: fine on a fast
    GPU too.) Every copy's output must be the first's."""
    win = LogWindow(server)
    force(server, decision.TARGET_ONLY)

    def from_probe() -> str:
        """The log from this request's own ``Prefill batch`` line after the scheduler's
        "force mode set to target-only" line. An earlier request's last lines can land
        after our window opened, and even after the force line: SGLang streams a
        request's last tokens before it logs that step's ``Decode batch`` line, and the
        overlap scheduler logs the line of the step it launched before it received the
        force only after that loop iteration's receive. The probe is sent once the force
        was answered, i.e. it is received at a later iteration than the force: every
        earlier step's line is written before the probe's prefill line."""
        text = win.text()
        mark = text.find(FORCED_TARGET_ONLY)
        start = -1 if mark < 0 else text.find(PREFILL, mark)
        return "" if start < 0 else text[start:]

    try:
        job = Background(lambda: generate_ids(server, [prompt] * copies, max_new))
        win.wait(lambda: len(DECODE_RE.findall(from_probe())) >= stretch_steps or not job.alive(), "target-only steps")
        force(server, decision.SPECULATIVE)
        outputs = job.result()
    finally:
        force(server, decision.AUTO)
    text = from_probe()
    assert text, f"no forced target-only line followed by the probe's prefill in the log:\n{win.text()[-3000:]}"
    cut = text.find(TO_SPECULATIVE)
    assert cut >= 0, f"no forced switch back to speculative in the log:\n{text[-3000:]}"
    before, after = text[:cut], text[cut:]
    assert all(o == outputs[0] for o in outputs), "the copies of one greedy prompt decoded differently"
    return ResumeProbe(
        output_ids=outputs[0],
        during=[float(m.group(2)) for m in DECODE_RE.finditer(before)],
        after=[float(m.group(2)) for m in DECODE_RE.finditer(after)],
    )


def assert_warm_after_resume(probe: ResumeProbe) -> float:
    """The guarded check: right after target-only, the draft still accepts >= WARM_FLOOR."""
    mean = probe.warm_mean()
    judged = probe.after[RESUME_SKIP : RESUME_SKIP + RESUME_WINDOW]
    assert mean >= WARM_FLOOR, (
        f"draft KV went cold during target-only: accept lengths after resuming {judged} (mean {mean:.2f} < {WARM_FLOOR})"
    )
    return mean


@dataclass(frozen=True)
class SwitchRun:
    outputs: list[list[int]]
    switches: tuple[str, ...]  # the modes switched to while the requests ran, in order

    @property
    def to_target_only(self) -> int:
        return self.switches.count(decision.TARGET_ONLY)

    @property
    def to_speculative(self) -> int:
        return self.switches.count(decision.SPECULATIVE)

    def switched_back_and_again(self) -> bool:
        """Back to speculative, then target-only again (the second wave)."""
        seq = "".join("s" if m == decision.SPECULATIVE else "t" for m in self.switches)
        return "st" in seq


def _switches(text: str) -> tuple[str, ...]:
    found = re.finditer(r"Dynamic speculation: switched to (target-only|speculative)", text)
    return tuple(decision.TARGET_ONLY if m.group(1) == "target-only" else decision.SPECULATIVE for m in found)


def flip_while_running(server: RigServer, prompts: list[list[int]], max_new: int, every: int = 3) -> SwitchRun:
    """One batch of ``prompts``; the forced mode flips every ``every`` decode steps."""
    win = LogWindow(server)
    job = Background(lambda: generate_ids(server, prompts, max_new))
    mode, last = decision.TARGET_ONLY, 0
    try:
        while job.alive():
            n = len(win.decodes())
            if n >= last + every:
                force(server, mode)
                mode = decision.SPECULATIVE if mode == decision.TARGET_ONLY else decision.TARGET_ONLY
                last = n
            time.sleep(0.01)
        outputs = job.result()
    finally:
        force(server, decision.AUTO)
    return SwitchRun(outputs, _switches(win.text()))


def waves(server: RigServer, prompts: list[list[int]], lengths: list[int]) -> SwitchRun:
    """Changing concurrency under the automatic rule: the first half of ``prompts`` at
    once (their lengths differ, so the batch shrinks as they finish); the second half
    joins once the server has switched back to speculative.

    Each half is ONE batch request, so its prompts reach the scheduler together however
    slow the client is (sent a prompt a request from threads, a loaded client's first wave
    arrived one by one and never went above N). What is left to the client is how soon the
    second wave follows the switch back: for it to join a running request (the mixed-chunk
    check), the first wave's longest request must outlast that reaction, so the caller sizes
    it (test_switch_exact.py's MIXED_WAVE_LENGTHS)."""
    half = len(prompts) // 2
    win = LogWindow(server)
    first = Background(lambda: generate_each(server, prompts[:half], lengths[:half]))
    win.wait(lambda: TO_SPECULATIVE in win.text() or not first.alive(), "the switch back to speculative")
    second = Background(lambda: generate_each(server, prompts[half:], lengths[half:]))
    outputs = first.result() + second.result()
    return SwitchRun(outputs, _switches(win.text()))
