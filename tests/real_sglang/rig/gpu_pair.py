"""scripts/gpu-check's pair (test rig only): the rig's trained tiny pair, or a real
target + EAGLE-3 draft from disk (``--model``/``--draft-model``), and what each means for
the checks.

``Workload`` holds the prompts every check sends and the expectations that depend on the
pair. The rig's pair speaks the period-12 language it was trained on (accept length 3.00
at its ceiling): prompts of that language, one request accepting >= ``sw.WARM_FLOOR``, the
warm-draft probe judged against that floor. A real pair gets its own tokens: the target's
tokenizer (transformers, from the model directory, offline) on ``TEXTS``; one request must
accept more than nothing (> ``PAIR_ACCEPT_FLOOR``), and the warm-draft probe is judged
against the same probe run speculative throughout (``warm_draft_vs_baseline``: accept
length after resuming >= ``RESUME_RATIO`` x before, issue 20's goal). Token-exactness
against the plain server (greedy, same dtype) holds for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from server_control.protocol import decision

from . import switching as sw
from .server import DECODE_RE, RigServer
from .trained_models import PERIOD, prompt_ids

PAIR_ACCEPT_FLOOR = 1.01  # a real pair: at least one draft token accepted in ~60
RESUME_RATIO = 0.98  # accept length after resuming over the speculative-throughout run's
STRESS_CAP = 8192  # a real pair's long stress prompts: its context, at most this
TEXTS = (
    "The river rose through the night, and by morning the old stone bridge stood alone in a wide brown lake.",
    "To bake bread, mix flour, water, salt and yeast, knead the dough until it is smooth, and let it rise.",
    "The committee met on Tuesday to discuss the budget for next year and the repairs to the library roof.",
    "A small robot rolled across the kitchen floor, stopped beside the cat, and asked whether it was hungry.",
    "In the winter the village was quiet; the only sounds were the wind and the bells of the church.",
    "She opened the letter slowly, read the first line twice, and then sat down by the window to think.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen inside the leaves of plants.",
    "The train to the coast left at seven, and the children pressed their faces to the glass the whole way.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle on the first day of spring.",
)


@dataclass(frozen=True)
class Workload:
    trained: bool  # the rig's trained pair (its language, its ceiling)
    prompts: list[list[int]]
    probe: list[int]
    accept_floor: float  # one request alone accepts at least this
    text_ids: list[int] = field(default_factory=list)  # a real pair: tokens long prompts are cut from
    context: int | None = None

    def long_prompt(self, i: int, n: int) -> list[int]:
        """Prompt ``i`` of ``n`` tokens (distinct per ``i``)."""
        if self.trained:
            return prompt_ids(200 + i, n)
        shift = (i * 37) % len(self.text_ids)
        ring = self.text_ids[shift:] + self.text_ids[:shift]
        return (ring * (n // len(ring) + 1))[:n]

    def stress_length(self, cuda: bool, max_new: int) -> int:
        """The stress's long prompt: 256 on the CPU (its 4,096-token KV pool), 1,536 for
        the rig's pair (2,048 positions), a real pair's context less the output, capped."""
        if not cuda:
            return 256
        if self.trained or self.context is None:
            return 1536
        return min(self.context - max_new - 16, STRESS_CAP)


def rig_workload() -> Workload:
    prompts = [prompt_ids(i, 2 * PERIOD + 5 * (i % 3)) for i in range(8)]
    return Workload(trained=True, prompts=prompts, probe=prompt_ids(100), accept_floor=sw.WARM_FLOOR)


def pair_workload(model: Path, context: int | None) -> Workload:
    """``TEXTS`` through the target's own tokenizer (offline, from ``model``)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    ids = [list(tok(text)["input_ids"]) for text in TEXTS]
    assert all(len(i) >= 8 for i in ids), f"the tokenizer of {model} gives prompts of {[len(i) for i in ids]} tokens"
    text_ids = [t for text in TEXTS for t in tok(" " + text, add_special_tokens=False)["input_ids"]]
    return Workload(
        trained=False,
        prompts=ids[:8],
        probe=ids[8],
        accept_floor=PAIR_ACCEPT_FLOOR,
        text_ids=text_ids,
        context=context,
    )


def describe(work: Workload) -> tuple[str, dict]:
    lengths = [len(p) for p in work.prompts]
    return f"{len(work.prompts)} prompts of {lengths} tokens + a probe of {len(work.probe)}", {"prompt_tokens": lengths}


def _accepts_from(text: str, start_tokens: int) -> list[float]:
    """Accept lengths of the decode lines in ``text`` whose step's first output token is
    token ``start_tokens`` (1-based) or later (one request alone: each step emits its
    accept length)."""
    out, made = [], 1  # the prefill emits the first token
    for m in DECODE_RE.finditer(text):
        accept = float(m.group(2))
        if made + 1 >= start_tokens:
            out.append(accept)
        made += max(1, round(accept))
    return out


def warm_draft_vs_baseline(server: RigServer, probe: list[int], want: list[int]) -> tuple[str, dict]:
    """A real pair's warm-draft check: the probe forced speculative throughout (the
    baseline), then target-only for 36 steps and speculative again (``sw.resume_probe``);
    both token-exact against the plain server; the mean accept length after resuming over
    the same output positions in the baseline >= ``RESUME_RATIO``."""
    win = sw.LogWindow(server)
    sw.force(server, decision.SPECULATIVE)
    try:
        base_out = sw.generate_ids(server, [probe], len(want))[0]
    finally:
        sw.force(server, decision.AUTO)
    assert base_out == want, "the speculative-throughout probe's tokens differ from the plain server"
    base_text = win.text()
    result = sw.resume_probe(server, probe, stretch_steps=36, max_new=len(want))
    assert result.output_ids == want, "the probe's tokens differ from the plain server"
    after = result.after[sw.RESUME_SKIP :]
    assert len(after) >= sw.RESUME_WINDOW, f"too few steps after resuming: {result.after}"
    # resumed at output token 1 (prefill) + one per target-only step + 1; the first step after is not judged
    before = _accepts_from(base_text, len(result.during) + 2 + sw.RESUME_SKIP)
    assert before, "no speculative step in the baseline over the positions after resuming"
    mean_after, mean_before = sum(after) / len(after), sum(before) / len(before)
    ratio = mean_after / mean_before
    assert ratio >= RESUME_RATIO, (
        f"draft KV went cold during target-only: accept {mean_after:.2f} after resuming, "
        f"{mean_before:.2f} speculative throughout ({ratio:.3f} < {RESUME_RATIO})"
    )
    return (
        f"accept {mean_after:.2f} after {len(result.during)} target-only steps vs {mean_before:.2f} "
        f"speculative throughout ({ratio:.3f}x >= {RESUME_RATIO})",
        {"accept_after_resume": round(mean_after, 2), "accept_baseline": round(mean_before, 2), "ratio": round(ratio, 3)},
    )
