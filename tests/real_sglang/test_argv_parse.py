"""Every command line we build goes through the real SGLang 0.5.23 parser (with the patch's
flags): the shipped profiles, the GPU check's servers, the rig's servers, and the flag names
our messages tell operators to use. ``specconsole launch`` asks the same parser before it
starts anything: a refused flag names the profile file and key, exit 2, no run recorded.
Negative control: the flag SGLang 0.5.23 dropped (``--cuda-graph-max-bs``) is refused."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from server_control.config.argv_check import PARSE_MODULE, check_argv
from server_control.config.profile import load_profile
from server_control.protocol import decision
from tests.real_sglang.conftest import SKIP_NO_SGLANG
from tests.real_sglang.rig import gpu_check
from tests.real_sglang.rig.build import REPO_ROOT, Rig, server_args
from tests.real_sglang.rig.pool import COMMON_ARGS, PATCHED_ARGS, Spec
from tests.support.cli import cli

pytestmark = [pytest.mark.sglang, SKIP_NO_SGLANG]

PROFILES = sorted((REPO_ROOT / "assets" / "profiles").glob("*.toml"))
FAKE_RIG = Rig(Path("/rig"), Path("/rig/lib"), Path("/rig/target"), Path("/rig/draft"), 7, "x")


def _gpu_check_argvs() -> dict[str, list[str]]:
    pair = argparse.Namespace(target=Path("/m/target"), draft=Path("/m/draft"))
    out = {}
    for backend, frac in ((None, None), ("fa3", 0.8), ("flashinfer", None)):
        opts = argparse.Namespace(attention_backend=backend, mem_fraction_static=frac)
        for spec in (Spec("trained"), Spec("trained", patched=False), Spec("random", tp=2, steps=3)):
            out[f"gpu-check {spec.name} {backend}"] = gpu_check.cuda_args(pair, spec, 30001, opts)
    return out


def _rig_argvs() -> dict[str, list[str]]:
    out = {}
    for tp in (1, 2):
        for overlap in (False, True):
            out[f"rig tp{tp} overlap={overlap}"] = server_args(
                FAKE_RIG, 30001, tp=tp, overlap=overlap, extra=[*COMMON_ARGS, *PATCHED_ARGS]
            )
    out["rig plain"] = server_args(FAKE_RIG, 30001, speculative=False, extra=list(COMMON_ARGS))
    adaptive = ["--speculative-adaptive", "--speculative-adaptive-config", "/x/adaptive.json"]  # mode_cost's auto_adaptive
    out["rig patched beside adaptive"] = server_args(FAKE_RIG, 30001, steps=3, extra=[*COMMON_ARGS, *PATCHED_ARGS, *adaptive])
    return out


@pytest.fixture(scope="module")
def parsed():
    """Every argv at once through one parser process: (argvs, answers, the parser's options)."""
    argvs = {**_gpu_check_argvs(), **_rig_argvs(), "negative control": ["--model-path", "x", "--cuda-graph-max-bs", "64"]}
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    res = subprocess.run(
        [sys.executable, "-m", PARSE_MODULE],
        input=json.dumps({"argvs": argvs}),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    answer = json.loads(res.stdout.strip().splitlines()[-1])
    return argvs, answer["argvs"], set(answer["options"])


def test_every_command_line_we_build_parses(parsed):
    argvs, answers, _ = parsed
    refused = {name: answers[name]["error"] for name in argvs if name != "negative control" and answers[name]["ok"] is not True}
    assert refused == {}
    assert len(argvs) >= 15


def test_the_flag_sglang_dropped_is_refused(parsed):
    _, answers, options = parsed
    assert answers["negative control"]["ok"] is False
    assert "ambiguous option: --cuda-graph-max-bs could match" in answers["negative control"]["error"]
    assert "--cuda-graph-max-bs" not in options and "--cuda-graph-max-bs-decode" in options
    assert "--speculative-disable-batch-threshold" in options  # the patch's flags are in the parser


def test_flag_names_in_our_messages_exist(parsed):
    _, _, options = parsed
    said = " ".join(decision.limit_warnings(64, 64, 64) + decision.limit_warnings(80, 64, 32))
    flags = set(re.findall(r"(--[a-z][a-z0-9-]+)", said))
    assert "--cuda-graph-max-bs-decode" in flags
    assert flags - options == set()


@pytest.mark.parametrize("path", PROFILES, ids=[p.stem for p in PROFILES])
def test_every_shipped_sglang_profile_parses(path, tmp_path, request):
    if "cpu-tiny" in path.name:
        request.getfixturevalue("rig")  # its working directory is the rig cache's current build
    profile = load_profile(path)
    if profile.kind != "sglang":
        pytest.skip(f"{path.name} runs the simulator (its flags are the simulator's)")
    spec = profile.launch_spec(tmp_path, preview=[])
    result = check_argv(profile, spec)
    assert (result.refusal, result.skipped) == (None, None)


def _bad_profile(tmp_path) -> Path:
    text = (REPO_ROOT / "assets" / "profiles" / "eagle3-tp8.toml").read_text()
    assert '"--cuda-graph-max-bs-decode", "64"' in text
    bad = tmp_path / "old-flag.toml"
    bad.write_text(
        text.replace('"--cuda-graph-max-bs-decode", "64"', '"--cuda-graph-max-bs", "64"').replace("port = 30000", "port = 1")
    )
    return bad


def test_launch_refuses_a_flag_sglang_refuses_before_anything_starts(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    bad = _bad_profile(tmp_path)
    res = cli("launch", "--profile", str(bad))
    assert res.returncode == 2, res.stderr
    line = [x for x in res.stderr.splitlines() if "SGLang refuses" in x]
    assert line == [
        f"specconsole: {bad}: [server] extra_args: SGLang refuses the command line: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    ]
    assert not list(state.rglob("*.json")), "a refused launch recorded a run"
    dry = cli("launch", "--profile", str(bad), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    out = json.loads(dry.stdout)
    assert out["parsed_by_sglang"] is False
    assert any("ambiguous option: --cuda-graph-max-bs" in p for p in out["problems"])
    good = cli("launch", "--profile", str(REPO_ROOT / "assets" / "profiles" / "eagle3-tp8.toml"), "--dry-run")
    assert good.returncode == 0, good.stderr
    assert "# SGLang's parser: takes it" in good.stdout
