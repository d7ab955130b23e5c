"""The switch on the real patched server, with models whose draft needs its own KV cache.

* Warm draft (issue item 1): one request runs speculative, is forced target-only for 36
  steps, then forced speculative. The trained draft reads the token PERIOD positions back
  from its OWN KV cache, so it accepts ~everything right after resuming only if
  draft-extend kept that cache written during target-only. Negative control, on the same
  server, under both schedulers: with SGLang's ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``
  switched on for the probe (SGLang skips draft-extend at steps=0; rig/skip_draft_extend.py)
  the same guarded check must FAIL and the acceptance must drop.
* Token-exact (item 2): float32 greedy outputs of a batch of prompts are identical, token
  for token, between a plain server (no speculation) and the patched server (a) forced to
  flip modes every 3 decode steps while the batch runs, (b) switching on its own while the
  concurrency changes. Trained and random-weight models.
* The same with SGLang's overlap scheduler (item 3; rig/overlap.py says what it takes).
* The synchronous server runs with ``--enable-mixed-chunk``: the waves' later requests
  are prefilled in mixed steps beside the running decodes (counted from SGLang's prefill
  lines, at least one asserted), token-exact against the plain server all the same.

One server at a time, shared with other modules (rig/pool.py): the classes run in the
order of tests/real_sglang/conftest.py's SHARED_ORDER, so that trained-plain and
trained-patched-overlap serve scripts/gpu-check's CPU run too (test_gpu_check_cpu.py)
and random-plain the sampling tests (test_sampling_exact.py), each started once; a
server handed over is reset first (rig/reuse.py).
"""

from __future__ import annotations

import re

import pytest

from server_control.protocol import decision, explore
from tests.real_sglang.conftest import SKIP_NO_SGLANG, report
from tests.real_sglang.rig import gpu_checks as gc
from tests.real_sglang.rig import switching as sw
from tests.real_sglang.rig.pool import RANDOM_KV, OneAtATime, Spec
from tests.real_sglang.rig.trained_models import PERIOD, prompt_ids
from tests.support.heavy import heavy

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(1200)]

MAX_NEW = 110  # the reference length; every run compares a prefix
PROMPTS = [prompt_ids(i, 2 * PERIOD + 5 * (i % 3)) for i in range(8)]
PROBE = prompt_ids(100)  # the warm-draft request
WAVE_LENGTHS = [16, 24, 32, 100, 40, 48, 56, 64]  # first half shrinks to one, then 4 join
# On the mixed-chunk server the second wave must join the first wave's last request while it
# runs. The rule switches back at batch 1, that request's token 32; it then has LONG_NEW - 32
# tokens left, ~99 speculative steps at the trained pair's 3 a step, for the client to see the
# switch and send the second wave (with 100 it had ~23: a loaded client on 3 workers missed
# it). The trained target keeps its period-k pattern for ~348 new tokens of this prompt.
LONG_NEW = 3 * MAX_NEW
MIXED_WAVE_LENGTHS = [16, 24, 32, LONG_NEW, 40, 48, 56, 64]
# SGLang's mixed chunked prefill (supported with EAGLE-3 in 0.5.23: a mixed step decodes the
# running requests one plain token each beside the new prefill), on the synchronous server
MIXED_CHUNK = ("--enable-mixed-chunk",)
MIXED_RE = re.compile(r"Prefill batch.*#running-req: ([1-9]\d*)")


def mixed_steps(log: str) -> int:
    """Prefill steps that carried running decodes (SGLang logs #running-req only with
    mixed chunk on: 0 otherwise)."""
    return len(MIXED_RE.findall(log))


# the random pair's servers run with the sampling tests' flags (KV pool, per-request
# seeding: rig/seeded_sampling.py; the same on the plain and the patched server, as
# before): one random-plain-seeded server serves both modules, random-patched-overlap-seeded
# the sampling tests and TestRandomOverlap (random-patched-seeded: the heavy TestRandom)
FLAGS = {"trained": {}, "random": {"extra": RANDOM_KV, "seeded": True}}


def reference(pool: OneAtATime, models: str) -> dict:
    """Plain-server outputs of PROMPTS and PROBE (MAX_NEW tokens), and of the long wave's
    prompt (LONG_NEW tokens), in one batch request (computed once per model kind)."""
    key = ("reference", models)
    if key not in pool.cache:
        server = pool.get(Spec(models, patched=False, **FLAGS[models]))
        long_at = MIXED_WAVE_LENGTHS.index(LONG_NEW)
        outs = sw.generate_each(server, [*PROMPTS, PROBE, PROMPTS[long_at]], [MAX_NEW] * (len(PROMPTS) + 1) + [LONG_NEW])
        pool.cache[key] = {"prompts": outs[: len(PROMPTS)], "probe": outs[len(PROMPTS)], "long": {long_at: outs[-1]}}
    return pool.cache[key]


def wave_reference(ref: dict, lengths: list[int]) -> list[list[int]]:
    """The plain outputs the waves of ``lengths`` compare against (a prefix each)."""
    return [ref["long"][i] if n > MAX_NEW else out for i, (out, n) in enumerate(zip(ref["prompts"], lengths))]


def assert_same_tokens(got: list[list[int]], want: list[list[int]]) -> None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        first = next((k for k, (a, b) in enumerate(zip(g, w)) if a != b), None)
        assert first is None and len(g) <= len(w), (
            f"prompt {i}: output differs from the plain server at token {first}: "
            f"{g[max(0, (first or 0) - 3) : (first or 0) + 3]} vs "
            f"{w[max(0, (first or 0) - 3) : (first or 0) + 3]}"
        )


class _TokenExact:
    SPEC: Spec
    WAVES = WAVE_LENGTHS

    def test_plain_reference(self, pool):
        ref = reference(pool, self.SPEC.models)
        assert all(len(o) == MAX_NEW for o in ref["prompts"])
        assert [len(o) for o in ref["long"].values()] == [LONG_NEW]
        for i, out in ref["long"].items():  # the long run's first MAX_NEW are the batch's
            assert out[:MAX_NEW] == ref["prompts"][i]
        if self.SPEC.models == "trained":  # the target continues the period-k pattern
            for prompt, out in [*zip(PROMPTS, ref["prompts"]), *((PROMPTS[i], o) for i, o in ref["long"].items())]:
                seq = prompt + out
                assert all(seq[i] == seq[i - PERIOD] for i in range(len(prompt), len(seq)))

    def test_the_event_loop_is_the_one_asked_for(self, pool):
        """An overlap class would pass on a synchronous server too: the resolved arguments
        and SGLang's warnings show which event loop runs."""
        text = pool.get(self.SPEC).log_text()
        assert f"'disable_overlap_schedule': {not self.SPEC.overlap}" in text
        sync = "Non-overlap (synchronous) spec v2 is used" in text
        assert sync is not self.SPEC.overlap

    def test_forced_flips_every_3_steps_are_token_exact(self, pool):
        """At least 5 forced switches each way while batches run, every output token-exact.
        How many flips the client makes in one batch depends on its speed (a loaded fresh
        clone made 5 and 4), so up to 3 batches run, each checked, their switches summed."""
        want = reference(pool, self.SPEC.models)["prompts"]
        server = pool.get(self.SPEC)
        to_target_only = to_speculative = batches = 0
        while batches < 3 and min(to_target_only, to_speculative) < 5:
            run = sw.flip_while_running(server, PROMPTS, MAX_NEW, every=3)
            assert_same_tokens(run.outputs, want)
            to_target_only, to_speculative = to_target_only + run.to_target_only, to_speculative + run.to_speculative
            batches += 1
        assert min(to_target_only, to_speculative) >= 5, (to_target_only, to_speculative, batches)

    def test_automatic_switches_under_changing_concurrency_are_token_exact(self, pool):
        want = wave_reference(reference(pool, self.SPEC.models), self.WAVES)
        server = pool.get(self.SPEC)
        start = len(server.log_text())
        run = sw.waves(server, PROMPTS, self.WAVES)
        assert [len(o) for o in run.outputs] == self.WAVES
        assert_same_tokens(run.outputs, want)
        # (the first wave may find the server target-only already: the previous test's
        # last forced mode; auto keeps it while the batch is > 2)
        assert run.switched_back_and_again(), run.switches
        if MIXED_CHUNK[0] in self.SPEC.extra:  # the second wave's prefills joined running decodes
            mixed = mixed_steps(server.log_text()[start:])
            report(f"mixed prefill + decode steps, {self.SPEC.name}", steps=mixed)
            assert mixed >= 1, server.log_tail()


class _WarmDraft(_TokenExact):
    def test_draft_is_warm_right_after_target_only(self, pool):
        want = reference(pool, "trained")["probe"]
        probe = sw.resume_probe(pool.get(self.SPEC), PROBE, stretch_steps=3 * PERIOD)
        assert_same_tokens([probe.output_ids], [want])
        assert set(probe.during) == {1.0}, probe.during
        mean = sw.assert_warm_after_resume(probe)
        if not self.SPEC.overlap:
            # the resume step drafts from the top-1 computed on resuming (target-only
            # steps skip draft-extend's lm_head: sglang_patch/lazy_draft_head.py); the
            # synchronous scheduler's first line after the switch is that step's
            assert probe.after and probe.after[0] >= 2.0, probe.after[:4]
        pool.cache[("warm", self.SPEC.overlap)] = mean
        report(f"accept after resuming, {self.SPEC.name}", mean=mean, steps=str(probe.after[:8]))


class _NegativeControl:
    """On the warm check's own server: SGLang skips draft-extend at target-only steps while
    the probe runs (rig/skip_draft_extend.py: SGLang's ``SGLANG_SPEC_SKIP_ZERO_STEP_DRAFT_EXTEND``
    read per step), so the same check must fail; the skip ends with the test."""

    SPEC: Spec

    def test_skipping_draft_extend_makes_the_warm_check_fail(self, pool):
        want = reference(pool, "trained")["probe"]
        server = pool.get(self.SPEC)
        with server.skipping_draft_extend():
            # 3x the reference's length: without draft-extend a target-only step is quicker,
            # and on a loaded machine (3 workers) the 74 steps left after the stretch ran out
            # before the client's force to speculative arrived
            probe = sw.resume_probe(server, PROBE, stretch_steps=3 * PERIOD, max_new=3 * MAX_NEW)
        assert_same_tokens([probe.output_ids[:MAX_NEW]], [want])  # the target is unaffected
        with pytest.raises(AssertionError, match="draft KV went cold"):
            sw.assert_warm_after_resume(probe)
        cold = probe.warm_mean()
        warm = pool.cache.get(("warm", self.SPEC.overlap), sw.WARM_FLOOR)
        report(f"accept after resuming, {self.SPEC.name}, draft-extend skipped", mean=cold, warm=warm, steps=str(probe.after[:8]))
        assert cold <= warm - 1.0, (cold, warm)

    def test_the_warm_check_passes_again_once_draft_extend_runs(self, pool):
        """The skip ended with the block: the server is the warm check's again."""
        probe = sw.resume_probe(pool.get(self.SPEC), PROBE, stretch_steps=3 * PERIOD)
        sw.assert_warm_after_resume(probe)


class TestTrained(_WarmDraft):
    SPEC = Spec("trained", extra=MIXED_CHUNK)
    WAVES = MIXED_WAVE_LENGTHS


class TestTrainedNegativeControl(_NegativeControl):
    SPEC = TestTrained.SPEC


class TestTrainedCatchUp:
    """The product's cold mode on the synchronous trained server: the cold-draft mark at 1
    and the probe twice as one batch (2 > 1), forced target-only for 3 x PERIOD steps, then
    speculative. Every target-only step runs cold (no per-step draft-extend, by the server's
    own counters) and keeps its rows; the step that resumes runs target-only once more and
    catches the draft up in one extend (sglang_patch/draft_catch_up.py). The trained draft
    reads the token PERIOD positions back from its own KV cache, so the speculative steps
    right after it accept as after a warm stretch, where a cold draft accepts ~nothing for
    PERIOD steps (_NegativeControl: the rig's skip of the extend, without catch-up). The
    overlap scheduler's server runs the same through scripts/gpu-check's own check
    (TestTrainedOverlapNegativeControl::test_gpu_checks_cold_draft_measures_a_caught_up_resume)."""

    SPEC = TestTrained.SPEC

    def test_a_cold_stretch_resumes_warm_after_the_catch_up(self, pool):
        want = reference(pool, "trained")["probe"]
        server = pool.get(self.SPEC)
        live = lambda: server.request("/server_info")["internal_states"][0]  # noqa: E731
        res = server.request("/set_internal_state", {"server_args": {decision.COLD_DRAFT_KEY: 1}})
        assert res and all(x is True for x in res), f"cold-draft mark 1 refused: {res}"
        before = live()
        try:
            probe = sw.resume_probe(server, PROBE, stretch_steps=3 * PERIOD, max_new=3 * MAX_NEW, copies=2)
        finally:
            res = server.request("/set_internal_state", {"server_args": {decision.COLD_DRAFT_KEY: 0}})
            assert res and all(x is True for x in res), f"cold-draft mark 0 refused: {res}"
        after = live()
        assert_same_tokens([probe.output_ids[:MAX_NEW]], [want])  # the target is unaffected
        state_before, state_after = before[decision.STATE_KEY], after[decision.STATE_KEY]
        ran = state_after["steps"][decision.TARGET_ONLY] - state_before["steps"][decision.TARGET_ONLY]
        cold = state_after["cold_steps"] - state_before["cold_steps"]
        assert ran >= 3 * PERIOD and cold == ran, f"{cold} of {ran} target-only steps ran cold (mark 1, batch 2)"
        caught = {k: state_after["catch_up"][k] - state_before["catch_up"][k] for k in state_after["catch_up"]}
        # one extend at the resume (2 x 3 x PERIOD rows: far below KEEP_ROWS), writing both
        # copies' kept rows and its own step's (target-only once more, not a cold step of the
        # stretch): every cold step's rows written, none dropped
        assert caught["caught_up"] == 1 and caught["dropped"] == 0, caught
        assert caught["rows"] == 2 * cold + 2 and caught["kept"] == 2 * cold, (caught, cold)
        # the first line after the switch may report the step before it, the next is the
        # catch-up step (target-only, 1.0); from there the draft proposes from its own KV
        judged = probe.after[sw.RESUME_SKIP + 1 : sw.RESUME_SKIP + 1 + sw.RESUME_WINDOW]
        mean = sum(judged) / max(1, len(judged))
        report(f"accept after a caught-up cold resume, {self.SPEC.name}", mean=mean, steps=str(probe.after[:8]), **caught)
        assert len(judged) == sw.RESUME_WINDOW and mean >= sw.WARM_FLOOR, (
            f"the draft resumed cold after the catch-up: accept lengths after resuming {probe.after[:8]}"
        )
        # the synchronous scheduler's first line after the switch is the catch-up step's own;
        # the next drafts from the next draft input the catch-up gave (not SGLang's zeroed stub)
        assert not self.SPEC.overlap and probe.after[0] == 1.0 and probe.after[1] >= 2.0, probe.after[:4]


class TestTrainedOverlap(_WarmDraft):
    SPEC = Spec("trained", overlap=True)


class TestTrainedOverlapNegativeControl(_NegativeControl):
    SPEC = TestTrainedOverlap.SPEC

    def test_gpu_checks_cold_draft_measures_a_caught_up_resume(self, pool):
        """scripts/gpu-check's "cold draft after target-only" on this server (the overlap
        scheduler): the product's mark (1, a batch of 2) runs every target-only step cold by
        the server's own counter, the tokens stay the plain server's, the resume catches the
        draft up in one extend, and the accept length after resuming is the warm figure
        (where the rig's skip without catch-up, the test above, loses PERIOD steps); the
        mark is back at 0 after it."""
        want = reference(pool, "trained")["probe"]
        server = pool.get(self.SPEC)
        detail, figures = gc.cold_draft(server, PROBE, want)
        warm = pool.cache.get(("warm", self.SPEC.overlap), 3.0)  # the warm probe's, else this pair's ceiling (2 steps + 1)
        report(f"accept after a caught-up cold resume, {self.SPEC.name}", detail=detail, warm=warm)
        assert figures["cold_steps"] >= 3 * PERIOD and figures["caught_up"] >= 1, detail
        # the overlap scheduler's first line after the switch may report the step before it,
        # the next is the catch-up step (target-only); then the draft proposes as warm
        assert figures["steps_to_recover"] in (0, 1), detail
        assert figures["accept_after_cold_resume"] >= warm - 0.3, (detail, warm)
        live = server.request("/server_info")["internal_states"][0]
        assert live[decision.COLD_DRAFT_KEY] == 0, live[decision.COLD_DRAFT_KEY]


@heavy("one more server: the random pair runs in CI under the overlap scheduler, the trained one under both")
class TestRandom(_TokenExact):
    SPEC = Spec("random", **FLAGS["random"])


class TestRandomOverlap(_TokenExact):
    SPEC = Spec("random", overlap=True, **FLAGS["random"])


def _curve_steps(server, mode: str, batches: range) -> int:
    """Decode steps the server's cost curves hold for ``mode`` at ``batches``."""
    (entry,) = server.request("/server_info")["internal_states"]
    rows = entry["dynamic_speculation"]["cost_curves"]["modes"].get(mode, [])
    return sum(r[2] for r in rows if r[0] in batches and r[1] in batches)


def _waves_counting(server, share: float):
    """The waves with exploration at ``share`` (dwell 0, N=2): the steps run against the
    rule (target-only at batch 1, speculative at 3-5) and the explored step count."""
    res = server.request(
        "/set_internal_state", {"server_args": {explore.SHARE_KEY: share, decision.DWELL_KEY: 0, decision.THRESHOLD_KEY: 2}}
    )
    assert res and all(x is True for x in res), res
    sw.force(server, decision.AUTO)
    before = (_curve_steps(server, decision.TARGET_ONLY, range(1, 2)), _curve_steps(server, decision.SPECULATIVE, range(3, 6)))
    (entry,) = server.request("/server_info")["internal_states"]
    explored = entry["dynamic_speculation"]["exploration"]["explored_steps"]
    run = sw.waves(server, PROMPTS, WAVE_LENGTHS)
    (entry,) = server.request("/server_info")["internal_states"]
    live = entry["dynamic_speculation"]
    after = (_curve_steps(server, decision.TARGET_ONLY, range(1, 2)), _curve_steps(server, decision.SPECULATIVE, range(3, 6)))
    return run, (after[0] - before[0], after[1] - before[1]), live["exploration"]["explored_steps"] - explored, live


class TestRandomOverlapExploration:
    """Exploration set at runtime on the last class's server (the same spec: no new
    server): both modes run at batches near N, every output token-exact."""

    SPEC = Spec("random", overlap=True, **FLAGS["random"])

    def test_exploration_runs_both_modes_near_n_token_exact(self, pool):
        want = reference(pool, self.SPEC.models)["prompts"]
        server = pool.get(self.SPEC)
        # the negative control first: without exploration the rule alone (dwell 0) never
        # runs target-only at batch 1 <= the low mark, nor speculative above N=2
        run, against_rule, explored, _ = _waves_counting(server, 0.0)
        assert_same_tokens(run.outputs, want)
        assert against_rule == (0, 0) and explored == 0, (against_rule, explored)
        # the waves' batch-1 tail is a handful of steps, fewer on a loaded machine (CI: 0
        # target-only at batch 1 in one run): up to 3 runs, each token-exact, their counts summed
        against_rule, explored, runs_done = (0, 0), 0, 0
        while runs_done < 3:
            runs_done += 1
            run, counted, more, live = _waves_counting(server, 0.1)
            assert_same_tokens(run.outputs, want)
            against_rule, explored = (against_rule[0] + counted[0], against_rule[1] + counted[1]), explored + more
            if against_rule[0] > 0 and against_rule[1] > 0:
                break
        assert against_rule[0] > 0 and against_rule[1] > 0, (against_rule, runs_done)
        assert explored > 0 and live["exploration"]["share"] == 0.1
        report("exploration on the CPU rig (random, overlap)", explored=explored, against_rule=str(against_rule), runs=runs_done)
        assert server.request("/set_internal_state", {"server_args": {explore.SHARE_KEY: 0}}) == [True]
