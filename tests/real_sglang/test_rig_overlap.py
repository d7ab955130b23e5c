"""The rig's overlap-scheduler stand-ins (rig/overlap.py): the torch row gather against
the semantics of SGLang's Triton ``_gather_rows_kernel``, and the preload installing both
replacements in a fresh process only when asked to, and two hooks of one module both
installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.real_sglang.conftest import SKIP_NO_SGLANG
from tests.real_sglang.rig.build import REPO_ROOT
from tests.support.lazy import lazy

# imported by the first test that runs, not by every worker that collects this module (tests/support/lazy.py)
torch = lazy("torch")
overlap = lazy("tests.real_sglang.rig.overlap")
pytestmark = pytest.mark.xdist_group("torch")  # one worker imports torch for these (tests/conftest.py)


@pytest.fixture(autouse=True)
def _needs_torch():
    pytest.importorskip("torch", reason="the stand-in gathers torch tensors")


def _kernel_semantics(indices, *bufs):
    """What the Triton kernel writes: output row i = source row indices[i], per buffer."""
    return tuple(
        None if b is None else torch.stack([b[int(i)] for i in indices.tolist()]) if len(indices) else b[:0] for b in bufs
    )


@pytest.mark.parametrize("hidden", [True, False])
def test_gather_matches_the_kernel_row_by_row(hidden):
    g = torch.Generator().manual_seed(3)
    topk_p, topk_index = torch.rand(9, 1, generator=g), torch.randint(0, 500, (9, 1), generator=g)
    tokens, states = torch.randint(0, 500, (9,), generator=g), torch.randn(9, 64, generator=g)
    idx = torch.tensor([7, 0, 7, 3], dtype=torch.int32)
    got = overlap.gather_spec_extras(idx, topk_p, topk_index, tokens, states if hidden else None)
    want = _kernel_semantics(idx, topk_p, topk_index, tokens, states if hidden else None)
    for a, b in zip(got, want):
        assert (a is None and b is None) or (torch.equal(a, b) and a.dtype == b.dtype)
    got[0][0, 0] = -1.0  # fresh tensors, as the kernel writes into new ones
    assert topk_p[7, 0] != -1.0


def test_gather_of_no_rows_and_of_a_strided_index():
    bufs = (torch.rand(5, 1), torch.zeros(5, 1, dtype=torch.long), torch.arange(5), None)
    empty = overlap.gather_spec_extras(torch.tensor([], dtype=torch.long), *bufs)
    assert [t.shape[0] for t in empty[:3]] == [0, 0, 0] and empty[3] is None
    strided = torch.tensor([[4, 9], [1, 9]])[:, 0]
    assert overlap.gather_spec_extras(strided, *bufs)[2].tolist() == [4, 1]


def _hooked(overlap: bool) -> list[str]:
    code = (
        "import tests.real_sglang.rig.preload\n"
        "import sglang.srt.arg_groups.speculative_hook as h\n"
        "import sglang.srt.managers.overlap_utils as o\n"
        "print(h._disable_overlap_schedule_for_cpu.__module__, "
        "o.gather_spec_extras.__module__)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), SPECCONSOLE_RIG_LIB="/nonexistent")
    env.pop("SPECCONSOLE_RIG_OVERLAP", None)
    if overlap:
        env["SPECCONSOLE_RIG_OVERLAP"] = "1"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout.split()


@pytest.mark.sglang
@SKIP_NO_SGLANG
def test_preload_replaces_both_only_with_the_variable():
    assert _hooked(overlap=True) == ["tests.real_sglang.rig.overlap"] * 2
    assert _hooked(overlap=False) == [
        "sglang.srt.arg_groups.speculative_hook",
        "sglang.kernels.ops.speculative.gather_spec_extras",
    ]


@pytest.mark.sglang
@SKIP_NO_SGLANG
def test_preload_runs_both_hooks_of_one_module(tmp_path):
    """Step timing and the op profiler both wrap ``ModelRunner.forward``: with both asked
    for, the preload installs both (the profiler's around the timer's)."""
    code = (
        "import os, tests.real_sglang.rig.preload\n"
        "from sglang.srt.model_executor.model_runner import ModelRunner as M\n"
        "f = M.forward\n"
        "print(os.path.basename(f.__code__.co_filename), os.path.basename(f.__wrapped__.__code__.co_filename))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), SPECCONSOLE_RIG_LIB="/nonexistent")
    env.update(SPECCONSOLE_RIG_STEP_TIMING=str(tmp_path / "t"), SPECCONSOLE_RIG_OP_PROFILE=str(tmp_path / "p"))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["op_profile.py", "step_timing.py"]
