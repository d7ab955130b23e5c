"""scripts/gpu-check on this CPU: every part but the GPU (issue item 6), in the time CI has.

``--device cpu`` runs the real script end to end on the CPU rig (overlap scheduler on,
through rig/overlap.py; no CUDA graphs) with two servers (plain, then patched): its
``main`` in this process, on the tier's shared servers (tests/real_sglang/conftest.py:
trained-plain comes from test_switch_exact.py's reference, trained-patched-overlap goes on
to its TestTrainedOverlap, each started once and reset when handed over; the script's own
process, exit codes and wrapper are the subprocess tests below): the plain
reference, start-up with the steps=0 state, switch both ways, graph / eager per bucket,
steps=0 memory, N's warnings in the log, runtime threshold, inter-token latency under
polling (the plain server SIGSTOPped and resumed, interleaved with the patched one) and
the per-mode tok/s of benchmarks/mode_cost.py at one level (the real
``specconsole bench --url``), then the summary, the JSON and the exit code. Left out with
``--skip`` because another test proves the same on the same kind of server (each SKIP line
is asserted, so a check cannot silently vanish):

  * warm draft, forced flips, automatic switches: test_switch_exact.py::TestTrainedOverlap
    (the same ``Spec("trained", overlap=True)`` server, token-exact against the plain one);
  * a rank failing before the build: test_patched_tp2_disagree.py (tp 2, a real gloo
    barrier in the build: every rank off, the server serves); a rank failing inside the
    build: test_patched_tp2_build_order.py (the server stops, named on both ranks);
  * adaptive on: test_installed_patch_with_adaptive.py (the threshold beside the controller).

The skipped checks' CPU parts ran once by hand (docs/gpu-check.md, "CPU run"). Its negative
control: on a machine without a GPU, ``--device cuda`` must fail (exit 1), not pass.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG, report
from tests.real_sglang.rig import gpu_budget, gpu_check, gpu_checks
from tests.real_sglang.rig.build import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu-check"
SKIPPED = [
    "warm draft after target-only",
    "cold draft after target-only",
    "forced flips under load",
    "automatic switches",
    "a rank fails inside a capture",
    "a rank fails before the build",
    "adaptive on",
]
EXPECTED = [
    ("preflight", True),
    ("build the rig's trained models", True),
    ("start trained-plain", True),
    ("tok/s plain", True),
    ("start trained-patched-overlap", True),
    ("start-up", True),
    ("switch both ways", True),
    ("graph / eager per bucket", True),
    ("sampled requests", True),
    ("steps=0 memory per rank", True),
    ("target-only stress at max batch", True),
    ("N warnings in the log", True),
    ("runtime threshold", True),
    ("warm draft after target-only", None),
    ("cold draft after target-only", None),
    ("ITL under polling", True),
    ("automatic switches", None),
    ("forced flips under load", None),
    ("tok/s per mode", True),
    ("a rank fails inside a capture (tp 1)", None),
    ("a rank fails before the build (tp 1)", None),
    ("adaptive on", None),
    ("no process left", True),
]


def _script(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=REPO_ROOT)


@pytest.mark.sglang_server
@SKIP_NO_SGLANG
@pytest.mark.timeout(2400)
def test_gpu_check_passes_on_the_cpu_rig(pool, tmp_path, capsys, monkeypatch):
    out = tmp_path / "results.json"
    monkeypatch.setenv(gpu_budget.T0_ENV, str(time.time()))  # as main would, kept to this test
    code = gpu_check.main(
        [
            "--device",
            "cpu",
            "--max-new",
            "110",
            "--levels",
            "2",
            "--warmup",
            "0.5",
            "--measure",
            "2",
            "--itl-requests",
            "1",
            "--itl-max-tokens",
            "24",
            "--itl-rounds",
            "1",
            "--skip",
            ",".join(SKIPPED),
            "--json",
            str(out),
            "--logs",
            str(tmp_path / "logs"),
        ],
        shared=pool,
    )
    stdout = capsys.readouterr().out
    assert code == 0, stdout[-6000:]
    results = json.loads(out.read_text())
    assert [(r["name"], r["ok"]) for r in results] == EXPECTED
    assert all(r["detail"] == f"skipped by --skip {r['name'].split(' (tp')[0]!r}" for r in results if r["ok"] is None)
    assert f"gpu-check: all passed (16/16 checks, {len(SKIPPED)} skipped)" in stdout
    assert "| c | plain | speculative | target-only | auto |" in stdout
    by_name = {r["name"]: r for r in results}
    report(
        "gpu-check --device cpu",
        **{k: v for k, v in by_name["start-up"]["figures"].items()},
        itl_patched_over_plain_console=by_name["ITL under polling"]["figures"]["patched_over_plain_console"],
        check_seconds={r["name"]: r["figures"].get("seconds") for r in results if r["ok"]},
    )


@pytest.mark.sglang
@SKIP_NO_SGLANG
def test_without_a_gpu_the_cuda_run_fails_at_preflight():
    """The negative control of the script itself: no GPU here, so it must say so and
    exit 1 (not skip to a pass)."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    res = _script(["--device", "cuda"], timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    first = res.stdout.splitlines()[0]
    assert first.startswith("FAIL  preflight: AssertionError: "), first
    assert "NVML: " in first and "no GPU" in first, first  # the reasons, read and named
    assert "gpu-check: FAILED (0/1 checks)" in res.stdout


def test_bad_arguments_exit_2():
    res = subprocess.run(
        [sys.executable, "-m", "tests.real_sglang.rig.gpu_check", "--levels", "0,x"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
    )
    assert res.returncode == 2 and "levels must be integers" in res.stderr


def _differs():
    raise AssertionError("tokens differ")


def test_the_summary_fails_on_one_failed_check():
    checks = gpu_checks.Checklist()
    checks.run("fine", lambda: ("ok", {"x": 1}))
    checks.run("broken", _differs)
    checks.skip("later", "not run: an earlier step failed")
    text = checks.summary()
    assert checks.failed
    assert text.splitlines()[:3] == [
        f"PASS  fine: ok [x=1, seconds={checks.results[0].figures['seconds']}]",
        "FAIL  broken: AssertionError: tokens differ",
        "----  later: not run: an earlier step failed",
    ]
    assert text.splitlines()[-1] == "gpu-check: FAILED (1/3 checks)"
    assert gpu_check.parse(["--device", "cpu"]).levels == [1, 4, 16]


def test_nvml_probe_says_why_without_a_gpu():
    """benchmarks/nvml_probe.py, the GPU proof of the NVML sampler: here (no driver) it must
    report NVML unavailable with the reason and exit 1."""
    res = subprocess.run(
        [sys.executable, "-m", "benchmarks.nvml_probe", "--seconds", "1"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
    )
    out = json.loads(res.stdout)
    if out.get("available"):
        pytest.skip("this machine has a GPU with a driver")
    assert res.returncode == 1 and out["reason"], res.stdout + res.stderr
