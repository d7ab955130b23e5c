"""The checks of scripts/gpu-check, each against a running server (test rig only).

Each check returns ``(detail, figures)`` or raises (AssertionError / an error) with the
reason; ``Checklist.run`` records either as one line of the summary. The same functions
run on the CPU rig (``scripts/gpu-check --device cpu``, what CI runs) and on a GPU.
"""

from __future__ import annotations

import re
import time
import traceback
from dataclasses import dataclass, field

from server_control.protocol import decision

from . import switching as sw
from .server import RigServer

STEPS0_RE = re.compile(
    r"Built adaptive runtime state steps=0: elapsed=([0-9.]+)s, "
    r"mem=(-?[0-9.]+)GB"
)
INIT_LINE = "Dynamic speculation disable enabled: threshold=2"
RANK_RE = r"^\[[^\]]* ({rank})\] .*{needle}"


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool | None  # None: not run (an earlier step failed, or skipped for time)
    detail: str
    figures: dict = field(default_factory=dict)
    skipped: bool = False  # not run for the time budget (gpu_budget.py): not a failure


class Checklist:
    def __init__(self) -> None:
        self.results: list[Result] = []

    def run(self, name: str, fn, *args, **kwargs) -> bool:
        t0 = time.monotonic()
        try:
            detail, figures = fn(*args, **kwargs)
            self.results.append(Result(name, True, detail, {**figures, "seconds": round(time.monotonic() - t0, 1)}))
            return True
        except Exception as exc:  # noqa: BLE001 - every failure is one summary line
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            self.results.append(Result(name, False, tb[:1500]))
            return False

    def skip(self, name: str, why: str) -> None:
        self.results.append(Result(name, None, why))

    def skip_for_time(self, name: str, why: str) -> None:
        self.results.append(Result(name, None, why, skipped=True))

    @property
    def failed(self) -> bool:
        return any(r.ok is not True and not r.skipped for r in self.results)

    def summary(self) -> str:
        mark = {True: "PASS", False: "FAIL", None: "----"}
        lines = []
        for r in self.results:
            figures = ", ".join(f"{k}={v}" for k, v in r.figures.items())
            tag = "SKIP" if r.skipped else mark[r.ok]
            lines.append(f"{tag}  {r.name}: {r.detail}" + (f" [{figures}]" if figures else ""))
        verdict = "FAILED" if self.failed else "all passed"
        ran = [r for r in self.results if not r.skipped]
        skipped = len(self.results) - len(ran)
        tail = f", {skipped} skipped" if skipped else ""
        lines.append(f"gpu-check: {verdict} ({sum(r.ok is True for r in ran)}/{len(ran)} checks{tail})")
        return "\n".join(lines)


_EXTENDS = ("draft_extend_eager", "draft_extend_graph")  # SGLang's own forwards of the draft's extend (forwards.py)
RESUME_COLD_WINDOW = 40  # steps after a cold resume judged for the mean: a cold draft recovers over tens of steps


def ranks_logging(server: RigServer, needle: str, since: int = 0) -> set[str]:
    """Rank tags ('TP0', ...) of the lines containing ``needle``; {'-'} for an untagged
    (tp 1) line."""
    found = set()
    for line in server.log_text()[since:].splitlines():
        if needle in line:
            m = re.match(r"^\[[^\]]*? (TP\d+)\]", line)
            found.add(m.group(1) if m else "-")
    return found


def startup(server: RigServer, *, ready_s: float, tp: int, cuda: bool) -> tuple[str, dict]:
    """Init line on every rank, the steps=0 state built (its cost), the event loop."""
    text = server.log_text()
    want = {f"TP{r}" for r in range(tp)} if tp > 1 else {"-"}
    assert ranks_logging(server, INIT_LINE) == want, f"init line not on every rank {want}"
    assert "target-only runtime state ready" in text, "the steps=0 state was not built"
    built = STEPS0_RE.search(text)
    assert built, "no 'Built adaptive runtime state steps=0' line"
    assert "'disable_overlap_schedule': False" in text, "the overlap scheduler is off"
    assert "Non-overlap (synchronous) spec v2 is used" not in text
    if cuda:
        assert "'disable_cuda_graph': False" in text, "CUDA graphs are off"
    return (
        f"ready in {ready_s:.0f} s; steps=0 state built in {built.group(1)} s, {built.group(2)} GB",
        {"ready_s": round(ready_s, 1), "steps0_s": float(built.group(1)), "steps0_gb": float(built.group(2))},
    )


def _accept(meta: dict) -> float:
    return 1 + meta["spec_num_correct_drafts"] / max(1, meta["spec_verify_ct"])


def switch_both_ways(
    server: RigServer, prompts: list[list[int]], *, tp: int, cuda: bool, floor: float = sw.WARM_FLOOR
) -> tuple[str, dict]:
    """Auto rule (threshold 2): one request speculates (accepting >= ``floor``: the rig's
    trained pair 2.0, a real pair gpu_pair.PAIR_ACCEPT_FLOOR); 6 at once switch every rank
    to target-only; one request again switches back."""
    want = {f"TP{r}" for r in range(tp)} if tp > 1 else {"-"}
    solo = server.request(
        "/generate", {"input_ids": prompts[0], "sampling_params": {"max_new_tokens": 60, "temperature": 0, "ignore_eos": True}}
    )
    first = _accept(solo["meta_info"])
    assert first >= floor, f"one request accepts {first:.2f} < {floor}"
    mark = len(server.log_text())
    sw.generate_ids(server, prompts[:6], 60)
    assert ranks_logging(server, sw.TO_TARGET_ONLY, mark) == want, "no switch to target-only"
    mark = len(server.log_text())
    sw.generate_ids(server, prompts[:1], 60)
    assert ranks_logging(server, sw.TO_SPECULATIVE, mark) == want, "no switch back"
    graphs = re.findall(r"accept len: ([0-9.]+).*?(?:cuda|cpu) graph: (True|False)", server.log_text())
    if cuda:
        assert any(g == "True" and float(a) > 1 for a, g in graphs), "no speculative decode step ran a CUDA graph"
    return f"accept {first:.2f} alone; switched on {sorted(want)} and back", {"accept": first}


SAMPLED = {"temperature": 1.0, "top_k": 8, "top_p": 0.9, "ignore_eos": True}


def sampled_requests(server: RigServer, prompts: list[list[int]], want: list[int]) -> tuple[str, dict]:
    """Sampled (temperature 1, top-k, top-p) requests in both modes: 2 at once speculate
        (threshold 2: on CUDA SGLang's sampled verify, the bundle's stand-in kernel), 6 at once
        run target-only (the sampler's renorm kernels). Every request gets its tokens, each a
        vocabulary id, and the server then answers a greedy request token-exact (a token past the vocabulary would
    end the detokenizer: the traceback check). On the CPU
        SGLang verifies greedily whatever the temperature: there this proves completion only."""
    max_new = 32
    mark = len(server.log_text())
    sw.force(server, decision.SPECULATIVE)  # an earlier check may have left target-only (hysteresis)
    try:
        spec = server.request("/generate", {"input_ids": prompts[:2], "sampling_params": {**SAMPLED, "max_new_tokens": max_new}})
    finally:
        sw.force(server, decision.AUTO)
    verifies = sum(o["meta_info"].get("spec_verify_ct", 0) for o in spec)
    assert verifies > 0, "the 2 sampled requests never verified a draft"
    wide = server.request("/generate", {"input_ids": prompts[:6], "sampling_params": {**SAMPLED, "max_new_tokens": max_new}})
    assert sw.TO_TARGET_ONLY in server.log_text()[mark:], "6 sampled requests did not switch to target-only"
    outs = [o["output_ids"] for o in [*spec, *wide]]
    assert all(len(o) == max_new for o in outs), [len(o) for o in outs]
    assert all(isinstance(t, int) and t >= 0 for o in outs for t in o), "a sampled token that is not a token id"
    assert "Traceback" not in server.log_text()[mark:], "a traceback in the log after sampled requests"
    again = sw.generate_ids(server, prompts[:1], len(want))
    assert again == [want], "a greedy request after the sampled ones differs from the plain server"
    return (
        f"{len(outs)} sampled requests x {max_new} tokens ({verifies} speculative verifies); greedy token-exact after",
        {"verifies": verifies},
    )


def runtime_threshold(server: RigServer, prompts: list[list[int]], tp: int) -> tuple[str, dict]:
    """Threshold 8 at runtime: read back on every rank, 6 requests speculate; back to 2."""
    mark = len(server.log_text())
    sw.set_threshold(server, 8)
    states = server.request("/server_info")["internal_states"]
    assert all(s[decision.THRESHOLD_KEY] == 8 for s in states), states
    want = {f"TP{r}" for r in range(tp)} if tp > 1 else {"-"}
    assert ranks_logging(server, "threshold changed 2 -> 8", mark) == want
    mark = len(server.log_text())
    sw.generate_ids(server, prompts[:6], 40)
    assert sw.TO_TARGET_ONLY not in server.log_text()[mark:], "switched at 6 <= 8"
    sw.set_threshold(server, 2)
    return "threshold 8 read back on every rank; 6 requests kept speculating", {}


def warm_draft(server: RigServer, probe: list[int], want: list[int]) -> tuple[str, dict]:
    result = sw.resume_probe(server, probe, stretch_steps=36, max_new=len(want))
    assert result.output_ids == want, "the probe's tokens differ from the plain server"
    mean = sw.assert_warm_after_resume(result)
    return (f"accept {mean:.2f} right after {len(result.during)} target-only steps", {"accept_after_resume": round(mean, 2)})


def cold_draft(server: RigServer, probe: list[int], want: list[int]) -> tuple[str, dict]:
    """The cold-draft mark on this pair: the probe twice as one batch (2 > the mark 1), forced
    target-only for 36 steps with the draft cold (SGLang's stub: no per-step draft-extend;
    each step's rows kept), then speculative, whose first step catches the draft up in one
    extend (sglang_patch/draft_catch_up.py). Token-exact against the plain server; every
    target-only step cold by the server's own counter, no draft-extend forward among them,
    and the catch-up run with every kept row written (its counters). The accept length after
    resuming is reported, not judged: on a real pair it says whether the caught-up draft
    proposes as a warm one (docs/sglang-patch.md "The cold draft")."""
    state = lambda: server.request("/server_info")["internal_states"][0][decision.STATE_KEY]  # noqa: E731
    res = server.request("/set_internal_state", {"server_args": {decision.COLD_DRAFT_KEY: 1}})
    assert res and all(x is True for x in res), f"cold-draft mark 1 refused: {res}"
    before = state()
    try:
        # 3x the reference's length: a cold target-only step is quicker than a warm one, and a
        # loaded machine's force to speculative can come after a shorter probe has ended
        result = sw.resume_probe(server, probe, stretch_steps=36, max_new=3 * len(want), copies=2)
    finally:
        res = server.request("/set_internal_state", {"server_args": {decision.COLD_DRAFT_KEY: 0}})
        assert res and all(x is True for x in res), f"cold-draft mark 0 refused: {res}"
    after = state()
    assert result.output_ids[: len(want)] == want, "the probe's tokens differ from the plain server with the draft cold"
    ran = after["steps"][decision.TARGET_ONLY] - before["steps"][decision.TARGET_ONLY]
    cold = after["cold_steps"] - before["cold_steps"]
    assert ran >= len(result.during) and cold == ran, f"{cold} of {ran} target-only steps ran cold (mark 1, batch 2)"
    extends = sum(after["forwards"][decision.TARGET_ONLY][k] - before["forwards"][decision.TARGET_ONLY][k] for k in _EXTENDS)
    assert extends == 0, f"the switch marked {cold} steps cold, but SGLang ran the draft's extend {extends} times"
    caught = {k: after["catch_up"][k] - before["catch_up"][k] for k in ("kept", "caught_up", "rows", "dropped")}
    assert caught["caught_up"] >= 1 and caught["dropped"] == 0 and caught["rows"] >= caught["kept"] == 2 * cold, (
        f"the cold stretch was not caught up before resuming: {caught} for {cold} cold steps of 2 requests"
    )
    judged = result.after[sw.RESUME_SKIP : sw.RESUME_SKIP + RESUME_COLD_WINDOW]
    assert judged, f"no speculative step after resuming: {result.after}"
    mean = sum(judged) / len(judged)
    recovered = next((i for i, a in enumerate(result.after[sw.RESUME_SKIP :]) if a >= sw.WARM_FLOOR), None)
    return (
        f"accept {mean:.2f} over {len(judged)} steps after {cold} cold target-only steps, caught up in "
        f"{caught['caught_up']} extend(s) of {caught['rows']} rows"
        + (f"; >= {sw.WARM_FLOOR} after {recovered} steps" if recovered is not None else "; never back"),
        {
            "accept_after_cold_resume": round(mean, 2),
            "cold_steps": cold,
            "steps_to_recover": recovered,
            "caught_up": caught["caught_up"],
            "rows": caught["rows"],
        },
    )


def flips_under_load(server: RigServer, prompts: list[list[int]], want: list[list[int]], seconds: float) -> tuple[str, dict]:
    """Batches of ``prompts``, the forced mode flipping every 3 steps, for ``seconds``;
    every output token-exact."""
    t0, batches, flips = time.monotonic(), 0, 0
    while batches == 0 or time.monotonic() - t0 < seconds:
        run = sw.flip_while_running(server, prompts, len(want[0]), every=3)
        assert run.outputs == want, f"batch {batches}: outputs differ from the plain server"
        batches, flips = batches + 1, flips + run.to_target_only + run.to_speculative
    assert flips >= 10, f"only {flips} switches happened"
    return (f"{batches} batches x {len(prompts)} token-exact, {flips} forced switches", {"batches": batches, "switches": flips})


def automatic_waves(server: RigServer, prompts: list[list[int]], want: list[list[int]]) -> tuple[str, dict]:
    lengths = [16, 24, 32, len(want[0])] + [40, 48, 56, 64][: len(prompts) - 4]
    run = sw.waves(server, prompts, lengths)
    assert [o for o in run.outputs] == [w[:n] for w, n in zip(want, lengths)], "outputs differ from the plain server"
    assert run.switched_back_and_again(), run.switches
    return (f"token-exact through {run.to_target_only} + {run.to_speculative} automatic switches", {})
