"""scripts/gpu-check with a real pair (``--model``/``--draft-model``), the parts that need no
server (cheap, every CI run): the options' validation and defaults, the servers' arguments
and the workload's prompts and expectations per pair. The real-pair path end to end (two
servers, the rig's trained pair passed as ``--model``/``--draft-model``) ran once by hand on
the CPU (docs/gpu-check.md, "A real pair").

Negative controls (run by hand): ``pair_problem`` accepting ``--model`` alone fails
``test_a_pair_is_both_or_neither``; ``_spec`` ignoring the paths (the rig's pair served)
fails ``test_a_real_pair_is_what_the_servers_serve``; ``_accepts_from`` counting every
step from the start fails ``test_the_baseline_is_read_over_the_positions_after_resuming``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.real_sglang.rig import gpu_check, gpu_check_args, gpu_pair
from tests.real_sglang.rig.build import REPO_ROOT, ModelPair
from tests.real_sglang.rig.switching import WARM_FLOOR


def _model(root: Path, name: str, positions: int | None = 4096) -> Path:
    d = root / name
    d.mkdir()
    config: dict[str, object] = {"architectures": ["LlamaForCausalLM"]}
    if positions is not None:
        config["max_position_embeddings"] = positions
    (d / "config.json").write_text(json.dumps(config))
    return d


def _refused(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        gpu_check.parse(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_a_pair_is_both_or_neither(tmp_path, capsys):
    target, draft = _model(tmp_path, "t"), _model(tmp_path, "d")
    assert "--model needs --draft-model" in _refused(["--model", str(target)], capsys)
    assert "--draft-model needs --model" in _refused(["--draft-model", str(draft)], capsys)
    missing = tmp_path / "nowhere"
    assert f"--model {missing}: does not exist" in _refused(["--model", str(missing), "--draft-model", str(draft)], capsys)
    bare = tmp_path / "bare"
    bare.mkdir()
    err = _refused(["--model", str(target), "--draft-model", str(bare)], capsys)
    assert f"--draft-model {bare}: no config.json" in err
    (bare / "config.json").write_text("{not json")
    assert "not readable as JSON" in _refused(["--model", str(target), "--draft-model", str(bare)], capsys)


def test_bad_pair_arguments_exit_2_from_the_script(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "tests.real_sglang.rig.gpu_check", "--model", str(_model(tmp_path, "t"))],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    assert res.returncode == 2 and "--model needs --draft-model" in res.stderr, res.stderr


def test_defaults_follow_the_pair(tmp_path, capsys):
    rig = gpu_check.parse(["--device", "cpu"])
    assert (rig.real_pair, rig.dtype, rig.attention_backend, rig.mem_fraction_static) == (False, "float32", "triton", 0.3)
    assert (rig.speculative_num_steps, rig.context_length, rig.max_new) == (2, None, gpu_check_args.MAX_NEW)
    assert "--max-new must be 100..250" in _refused(["--max-new", "300"], capsys)
    target, draft = _model(tmp_path, "t", positions=131072), _model(tmp_path, "d")
    pair = ["--model", str(target), "--draft-model", str(draft)]
    real = gpu_check.parse(pair)
    assert (real.real_pair, real.dtype, real.attention_backend, real.mem_fraction_static) == (True, "auto", None, None)
    assert (real.speculative_num_steps, real.context_length) == (3, gpu_check_args.CONTEXT_CAP)
    assert (real.budget_s, rig.budget_s, gpu_check.parse([]).budget_s) == (0, 0, 420)  # cuda, rig's pair: 420
    assert gpu_check.parse([*pair, "--budget-s", "500"]).budget_s == 500
    assert gpu_check.parse([*pair, "--max-new", "1000"]).max_new == 1000
    own = gpu_check.parse([*pair, "--dtype", "bfloat16", "--context-length", "8192", "--speculative-num-steps", "5"])
    assert (own.dtype, own.context_length, own.speculative_num_steps) == ("bfloat16", 8192, 5)
    short = ["--model", str(_model(tmp_path, "short", positions=2048)), "--draft-model", str(draft)]
    assert gpu_check.parse(short).context_length == 2048
    assert "shorter than twice --max-new" in _refused([*pair, "--context-length", "100"], capsys)
    assert "--speculative-num-steps must be >= 1" in _refused([*pair, "--speculative-num-steps", "0"], capsys)


def test_a_real_pair_is_what_the_servers_serve(tmp_path):
    target, draft = _model(tmp_path, "t", positions=4096), _model(tmp_path, "d")
    opts = gpu_check.parse(["--model", str(target), "--draft-model", str(draft)])
    spec = gpu_check._spec(opts, overlap=True)
    assert (spec.paths, spec.dtype, spec.steps) == ((str(target), str(draft)), "auto", 3)
    assert spec.extra == ("--context-length", "4096") and spec.name == "pair-patched-overlap"
    assert gpu_check._spec(opts, patched=False).name == "pair-plain"
    pair = ModelPair(kind="pair", target=target, draft=draft, facts={})
    args = gpu_check.cuda_args(pair, spec, 31234, opts)
    assert args[args.index("--model-path") + 1] == str(target)
    assert args[args.index("--speculative-draft-model-path") + 1] == str(draft)
    assert args[args.index("--dtype") + 1] == "auto" and "--attention-backend" not in args
    assert "--mem-fraction-static" not in args
    assert [args[args.index(k) + 1] for k in ("--speculative-num-steps", "--speculative-eagle-topk")] == ["3", "1"]
    assert args[args.index("--speculative-num-draft-tokens") + 1] == "4"
    assert args[args.index("--context-length") + 1] == "4096"
    plain = gpu_check.cuda_args(pair, gpu_check._spec(opts, patched=False), 31234, opts)
    assert "--speculative-algorithm" not in plain and "--context-length" in plain
    rig = gpu_check.parse([])
    rig_spec = gpu_check._spec(rig)
    rig_args = gpu_check.cuda_args(ModelPair("trained", target, draft, {}), rig_spec, 1, rig)
    assert (rig_spec.paths, rig_spec.name) == (None, "trained-patched")
    assert rig_args[rig_args.index("--dtype") + 1] == "float32"
    assert rig_args[rig_args.index("--attention-backend") + 1] == "triton"
    assert rig_args[rig_args.index("--mem-fraction-static") + 1] == "0.3"
    assert "--context-length" not in rig_args


@pytest.mark.xdist_group("torch")  # with the other torch tests: one worker imports it (tests/support/lazy.py)
def test_a_real_pair_speaks_its_own_tokens(tmp_path):
    pytest.importorskip("transformers")
    from tests.real_sglang.rig import tiny_models

    target = _model(tmp_path, "t", positions=32768)
    tok = tiny_models._train_tokenizer(target)
    work = gpu_pair.pair_workload(target, 32768)
    assert not work.trained and work.accept_floor == gpu_pair.PAIR_ACCEPT_FLOOR < WARM_FLOOR
    assert [tok.decode(p) for p in work.prompts] == list(gpu_pair.TEXTS[:8])
    assert tok.decode(work.probe) == gpu_pair.TEXTS[8]
    long = [work.long_prompt(i, 3000) for i in range(3)]
    assert all(len(p) == 3000 for p in long) and long[0] != long[1]
    assert set(long[0]) <= set(work.text_ids)
    assert work.stress_length(cuda=True, max_new=24) == gpu_pair.STRESS_CAP
    assert work.stress_length(cuda=False, max_new=24) == 256
    assert gpu_pair.Workload(False, [], [], 1.01, [1, 2], context=2048).stress_length(True, 24) == 2048 - 24 - 16
    rig = gpu_pair.rig_workload()
    assert rig.trained and rig.accept_floor == WARM_FLOOR and rig.stress_length(True, 24) == 1536
    assert len(rig.long_prompt(0, 300)) == 300


def _decode(accept: float) -> str:
    return f"[x] Decode batch, #running-req: 1, accept len: {accept:.2f}, cpu graph: False\n"


def test_the_baseline_is_read_over_the_positions_after_resuming():
    # the prefill emits token 1; steps of 3 tokens then emit 2-4, 5-7, 8-10, ...
    text = "".join(_decode(a) for a in (3, 3, 3, 1, 2, 3))
    assert gpu_pair._accepts_from(text, 1) == [3, 3, 3, 1, 2, 3]
    assert gpu_pair._accepts_from(text, 8) == [3, 1, 2, 3]  # the step starting at token 8 on
    assert gpu_pair._accepts_from(text, 100) == []
