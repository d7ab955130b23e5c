"""Exact beyond greedy: the patched server against a plain one, in every mode of sampling.

The rig's random-weight pair (broad next-token distributions; drafts nearly always
rejected), float32, the patched server under the overlap scheduler (SGLang's default). The patched server runs each check forced
target-only, forced speculative and with the forced mode flipped every 3 decode steps
while the requests run; the plain server (the target alone) gives the reference.

* penalties (frequency, presence, repetition) under greedy: the same tokens;
* ``return_logprob`` with ``top_logprobs_num=5`` (greedy): the same tokens and top-5 ids,
  every logprob within 1e-3;
* JSON-schema constrained generation (xgrammar) under flips: valid JSON of the schema,
  and the same tokens as the plain server (greedy; ending at the grammar's end: with
  ``ignore_eos`` the plain server emits one more token after the grammar's EOS and the
  patched one stops there: SGLang's plain decode checks the finish before advancing the
  grammar, every EAGLE step after, so any EAGLE server differs so; docs/cpu-rig.md);
* sampled (temperature 1.0, top_p 0.9): the first token (sampled by the prefill) and the
  second and third (sampled by decode steps, the ones a mode changes) of 2,000 requests
  (all in one batch: the servers get a KV pool for 40,000 tokens),
  a chi-square homogeneity test against the plain server's 2,000. Negative control: the
  same test against the plain server sampling at temperature 0.5 (a deliberately skewed
  sampler) must reject at the first token (the one position whose distribution a
  temperature moves here: see the test). Target-only steps must pass (``sglang_patch/target_only_sampling.py``;
  without it SGLang commits the argmax there). Speculative steps on the CPU are REJECTED,
  and asserted so: SGLang's ``_verify_uses_greedy`` commits the argmax of every verify on
  the CPU (no speculative sampling kernel there), with or without the patch; forced
  speculative and flips (half their steps speculative) therefore differ from plain on
  this rig. On a GPU the sampling kernel samples; the CPU rig cannot show that.

One server at a time (rig/pool.py): the plain server, then the patched one, each started
once (tests/real_sglang/conftest.py's SHARED_ORDER runs the tests on the plain server's
references first: the seeded ones, the heavy tier's samples; the greedy ones come with the
first test). Both run with seeded sampling per request (rig/seeded_sampling.py); the plain
one (random-plain-seeded) is the one test_switch_exact.py's random classes started for
their reference, reused here (reset: rig/reuse.py), and the patched one
(random-patched-overlap-seeded) goes on to its TestRandomOverlap.
"""

from __future__ import annotations

import json
import time

import pytest

from server_control.protocol import decision
from tests.real_sglang.conftest import SKIP_NO_SGLANG, report
from tests.real_sglang.rig import switching as sw
from tests.real_sglang.rig.pool import RANDOM_KV, OneAtATime, Spec
from tests.support.heavy import heavy

pytestmark = [pytest.mark.sglang_server, SKIP_NO_SGLANG, pytest.mark.timeout(1800)]

MODELS = "random"
# 2,000 requests of 15 tokens decode as one batch; JSON without free whitespace; seeded
# sampling per request (rig/seeded_sampling.py: a request without a sampling_seed samples
# as on a stock server), so one plain and one patched server serve every test here
PLAIN = Spec(MODELS, patched=False, extra=RANDOM_KV, seeded=True)
# the overlap scheduler (SGLang's default): the server test_switch_exact.py's TestRandomOverlap
# goes on with; the synchronous scheduler's random-pair server is the heavy tier's TestRandom
PATCHED = Spec(MODELS, overlap=True, extra=RANDOM_KV, seeded=True)
PROMPTS = [[(7 * i + 3 * k) % 400 + 20 for k in range(12 + i)] for i in range(4)]
PENALTIES = {"frequency_penalty": 0.6, "presence_penalty": 0.4, "repetition_penalty": 1.3}
SAMPLES = 2000
SAMPLED = {"temperature": 1.0, "top_p": 0.9}
SKEWED = {"temperature": 0.5, "top_p": 0.9}
# bounded: a random model would otherwise fill any budget with whitespace or digits
SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ann", "bob", "cy"]}, "ok": {"type": "boolean"}},
    "required": ["name", "ok"],
    "additionalProperties": False,
}
P_PASS = 1e-3  # a mode whose distribution equals plain's passes at this level
P_REJECT = 1e-6  # the skewed control (and CPU speculative) must fall below it
MODES = (decision.TARGET_ONLY, decision.SPECULATIVE, "flips")


def generate(server, prompts, params: dict, timeout: float = 900, **top) -> list[dict]:
    body = {"input_ids": prompts, "sampling_params": {"ignore_eos": True, **params}, **top}
    return server.request("/generate", body, timeout=timeout)


def under(server, mode: str, fn):
    """``fn()`` with the patched server forced into ``mode``, or flipping every 3 steps."""
    if mode != "flips":
        sw.force(server, mode)
        try:
            return fn(), None
        finally:
            sw.force(server, decision.AUTO)
    win = sw.LogWindow(server)
    job = sw.Background(fn)
    mode_now, last, flips = decision.TARGET_ONLY, 0, 0
    try:
        while job.alive():
            n = len(win.decodes())
            if n >= last + 3:
                sw.force(server, mode_now)
                flips += 1
                mode_now = decision.SPECULATIVE if mode_now == decision.TARGET_ONLY else decision.TARGET_ONLY
                last = n
            time.sleep(0.01)
        return job.result(), flips
    finally:
        sw.force(server, decision.AUTO)


POSITIONS = (0, 1, 2)  # the prefill's token, the first and the second decode step's


def tokens_at(outs: list[dict]) -> list[list[int]]:
    return [[o["output_ids"][k] for o in outs] for k in POSITIONS]


def chi_square_p(a: list[int], b: list[int]) -> float:
    """Homogeneity of two samples of tokens (bins with a pooled count < 10 lumped)."""
    stats = pytest.importorskip("scipy.stats")
    from collections import Counter

    ca, cb = Counter(a), Counter(b)
    pooled = ca + cb
    keep = [t for t, n in pooled.items() if n >= 10]
    rows = [
        [ca[t] for t in keep] + [sum(n for t, n in ca.items() if t not in keep)],
        [cb[t] for t in keep] + [sum(n for t, n in cb.items() if t not in keep)],
    ]
    if rows[0][-1] + rows[1][-1] == 0:
        rows = [r[:-1] for r in rows]
    if len(rows[0]) < 2:
        return 1.0 if ca == cb else 0.0
    return float(stats.chi2_contingency(rows)[1])


def references(pool: OneAtATime) -> dict:
    """The plain server's greedy references (penalties, logprobs, json schema)."""
    if "plain" not in pool.cache:
        plain = pool.get(PLAIN)
        json_outs = generate(
            plain, PROMPTS, {"max_new_tokens": 64, "temperature": 0, "ignore_eos": False, "json_schema": json.dumps(SCHEMA)}
        )
        pool.cache["plain"] = {
            "penalties": [
                o["output_ids"] for o in generate(plain, PROMPTS, {"max_new_tokens": 40, "temperature": 0, **PENALTIES})
            ],
            "logprobs": generate(
                plain, PROMPTS, {"max_new_tokens": 24, "temperature": 0}, return_logprob=True, top_logprobs_num=5
            ),
            "json": [o["output_ids"] for o in json_outs],
            "json_text": [o["text"] for o in json_outs],
        }
    return pool.cache["plain"]


def sampled_references(pool: OneAtATime) -> dict:
    """The plain server's 2,000 samples at temperature 1.0 and at 0.5 (the control)."""
    if "plain sampled" not in pool.cache:
        plain = pool.get(PLAIN)
        pool.cache["plain sampled"] = {
            "sampled": tokens_at(generate(plain, [PROMPTS[0]] * SAMPLES, {"max_new_tokens": 3, **SAMPLED})),
            "skewed": tokens_at(generate(plain, [PROMPTS[0]] * SAMPLES, {"max_new_tokens": 3, **SKEWED})),
        }
    return pool.cache["plain sampled"]


def patched(pool: OneAtATime):
    return pool.get(PATCHED)


@pytest.mark.parametrize("mode", MODES)
def test_penalties_under_greedy_equal_plain(pool, mode):
    want = references(pool)["penalties"]
    server = patched(pool)
    outs, _ = under(server, mode, lambda: generate(server, PROMPTS, {"max_new_tokens": 40, "temperature": 0, **PENALTIES}))
    assert [o["output_ids"] for o in outs] == want


@pytest.mark.parametrize("mode", MODES)
def test_logprobs_top5_equal_plain(pool, mode):
    want = references(pool)["logprobs"]
    server = patched(pool)
    outs, _ = under(
        server,
        mode,
        lambda: generate(server, PROMPTS, {"max_new_tokens": 24, "temperature": 0}, return_logprob=True, top_logprobs_num=5),
    )
    worst = 0.0
    for got, ref in zip(outs, want, strict=True):
        assert got["output_ids"] == ref["output_ids"]
        g, r = got["meta_info"], ref["meta_info"]
        assert [t[1] for t in g["output_token_logprobs"]] == [t[1] for t in r["output_token_logprobs"]]
        worst = max(
            [worst, *(abs(a[0] - b[0]) for a, b in zip(g["output_token_logprobs"], r["output_token_logprobs"], strict=True))]
        )
        for gt, rt in zip(g["output_top_logprobs"], r["output_top_logprobs"], strict=True):
            assert [t[1] for t in gt] == [t[1] for t in rt]
            worst = max([worst, *(abs(a[0] - b[0]) for a, b in zip(gt, rt, strict=True))])
    report(f"logprobs {mode}", max_abs_delta=worst)
    assert worst < 1e-3


def test_json_schema_under_flips_is_valid_and_equal_plain(pool):
    ref = references(pool)
    server = patched(pool)
    outs, flips = under(
        server,
        "flips",
        lambda: generate(
            server, PROMPTS, {"max_new_tokens": 64, "temperature": 0, "ignore_eos": False, "json_schema": json.dumps(SCHEMA)}
        ),
    )
    for text in ref["json_text"]:  # the reference itself is a complete document
        doc = json.loads(text)
        assert set(doc) == {"name", "ok"}, text
    for o in outs:
        doc = json.loads(o["text"])
        assert doc["name"] in ("ann", "bob", "cy") and isinstance(doc["ok"], bool), o["text"]
    assert [o["output_ids"] for o in outs] == ref["json"]
    assert [json.loads(t) for t in ref["json_text"]] == [json.loads(o["text"]) for o in outs]
    report("json schema under flips", flips=flips)


# The 2,000-sample chi-square tests (the four took 109 s at load ~1 on 2 cores, far longer
# at load 17-35): the heavy tier (tests/support/heavy.py), not in CI.
HEAVY = heavy("2,000-sample chi-square, ~2 min at low load")


@HEAVY
def test_the_chi_square_test_catches_a_skewed_sampler(pool):
    """Negative control first: plain at temperature 1.0 vs plain at 0.5, 2,000 each. Only
    the first token's distribution can show a temperature: it has one context (the prompt),
    while the marginal at positions 1 and 2 mixes hundreds of contexts (the random pair's
    broad distributions), which stays near uniform at any temperature (at 0.7: p 0.78 and
    0.34 there, 2026-12-02). What those positions do catch is the argmax (the speculative
    arm below); a temperature or seed error at a decode step is caught token for token by
    the seeded test further down."""
    ref = sampled_references(pool)
    ps = [chi_square_p(a, b) for a, b in zip(ref["sampled"], ref["skewed"], strict=True)]
    report("sampling: skewed control", **{f"p_token{k}": p for k, p in zip(POSITIONS, ps)})
    assert ps[0] < P_REJECT, ps


@HEAVY
@pytest.mark.parametrize("mode", [decision.TARGET_ONLY, "flips", decision.SPECULATIVE])
def test_sampled_distribution(pool, mode):
    ref = sampled_references(pool)
    server = patched(pool)
    outs, flips = under(server, mode, lambda: generate(server, [PROMPTS[0]] * SAMPLES, {"max_new_tokens": 3, **SAMPLED}))
    got = tokens_at(outs)
    ps = [chi_square_p(a, b) for a, b in zip(ref["sampled"], got, strict=True)]
    report(
        f"sampling {mode}", flips=flips, **{f"p_token{k}": p for k, p in zip(POSITIONS, ps)}, distinct=[len(set(t)) for t in got]
    )
    assert ps[0] > P_PASS, ps  # the prefill samples with SGLang's plain sampler in every mode
    if mode == decision.TARGET_ONLY:
        assert ps[1] > P_PASS and ps[2] > P_PASS, ps
    else:  # SGLang on the CPU: a verify with drafts commits the argmax (_verify_uses_greedy)
        assert min(ps[1:]) < P_REJECT, ps


# Seeded sampling, token for token: SGLang draws each request's token from its own
# ``sampling_seed`` and the token's position (murmur hash, the pytorch sampling backend;
# on the CPU rig through rig/seeded_sampling.py, since --enable-deterministic-inference
# refuses the CPU's attention backend), so a target-only step that samples as a plain step
# does gives the plain server's very tokens. Stronger than the chi-square above (which
# compares marginals: at positions 1 and 2 a mixture over hundreds of contexts), and cheap
# enough for CI: 48 requests of 12 tokens.
SEEDS = range(12)


def seeded(server, params: dict, seed_offset: int = 0) -> list[list[int]]:
    prompts = [p for p in PROMPTS for _ in SEEDS]
    body = {
        "input_ids": prompts,
        "sampling_params": [
            {"ignore_eos": True, "max_new_tokens": 12, **params, "sampling_seed": seed + seed_offset}
            for _ in PROMPTS
            for seed in SEEDS
        ],
    }
    return [o["output_ids"] for o in server.request("/generate", body, timeout=900)]


def seeded_references(pool: OneAtATime) -> dict:
    if "plain seeded" not in pool.cache:
        plain = pool.get(PLAIN)
        pool.cache["plain seeded"] = {
            "sampled": seeded(plain, SAMPLED),
            "again": seeded(plain, SAMPLED),
            "other seeds": seeded(plain, SAMPLED, seed_offset=1000),
            "skewed": seeded(plain, SKEWED),
        }
    return pool.cache["plain seeded"]


def _differ(a: list[list[int]], b: list[list[int]]) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def test_seeded_references_are_seeded_and_depend_on_the_sampler(pool):
    """The controls: the same seeds give the same tokens; other seeds, or a sampler at
    temperature 0.5, give other tokens (so equality below is no accident of the seeds)."""
    ref = seeded_references(pool)
    assert ref["again"] == ref["sampled"]
    assert _differ(ref["sampled"], ref["other seeds"]) >= 40
    assert _differ(ref["sampled"], ref["skewed"]) >= 20
    report(
        "seeded controls", other_seeds=_differ(ref["sampled"], ref["other seeds"]), skewed=_differ(ref["sampled"], ref["skewed"])
    )


@pytest.mark.parametrize("mode", [decision.TARGET_ONLY, decision.SPECULATIVE])
def test_seeded_sampling_target_only_equals_plain_token_for_token(pool, mode):
    ref = seeded_references(pool)["sampled"]
    server = pool.get(PATCHED)
    got, _ = under(server, mode, lambda: seeded(server, SAMPLED))
    report(f"seeded sampling {mode}", requests_differing=_differ(ref, got), of=len(ref))
    if mode == decision.TARGET_ONLY:
        assert got == ref
    else:  # SGLang on the CPU: a verify with drafts commits the argmax (_verify_uses_greedy)
        assert _differ(ref, got) >= 20
