"""gpu_bundle's build split, install (verified, once per part) and the stand-in
``sgl_kernel`` package as SGLang imports it (in a child whose sys.path finds it first)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gpu_bundle import build, run
from tests.real_sglang.rig import gpu_check

REPO = Path(__file__).resolve().parents[2]


def _wheel(folder: Path, name: str, version: str = "1.0") -> Path:
    """A minimal valid pure-Python wheel holding module ``name``."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": f"VALUE = {name!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for f, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{f},sha256={digest},{len(text)}")
    record.append(f"{info}/RECORD,,")
    with zipfile.ZipFile(path, "w") as z:
        for f, text in files.items():
            z.writestr(f, text)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def _bundle(tmp: Path) -> Path:
    out = tmp / "bundle"
    entries = []
    for part, name in ((1, "alpha_pkg"), (2, "beta_pkg")):
        folder = out / f"part{part}"
        folder.mkdir(parents=True)
        w = _wheel(folder, name)
        entries.append(
            {"name": name, "version": "1.0", "file": w.name, "part": part, "bytes": w.stat().st_size, "sha256": build.sha256(w)}
        )
    (out / "manifest.json").write_text(json.dumps({"part_mib": 1, "parts": {"1": 1, "2": 1}, "wheels": entries}))
    return out


def test_split_fills_two_parts_or_names_what_does_not_fit():
    mib = build.MIB
    parts = build.split({"a.whl": 40 * mib, "b.whl": 30 * mib, "c.whl": 20 * mib, "d.whl": 5 * mib}, 60 * mib)
    sizes = {"a.whl": 40, "b.whl": 30, "c.whl": 20, "d.whl": 5}
    assert sorted(parts[0] + parts[1]) == sorted(sizes)
    assert all(sum(sizes[f] for f in p) <= 60 for p in parts)
    with pytest.raises(SystemExit, match="c.whl"):
        build.split({"a.whl": 50 * mib, "b.whl": 50 * mib, "c.whl": 20 * mib}, 60 * mib)


def test_requirements_must_be_pinned(tmp_path):
    f = tmp_path / "req.txt"
    f.write_text("# c\nfoo==1\nbar\n")
    with pytest.raises(ValueError, match="'bar' is not pinned"):
        build.requirements(f)
    assert "sglang==0.5.23" in build.requirements()


def test_install_parts_once_each_and_check(tmp_path):
    bundle = _bundle(tmp_path)
    second = bundle / "part2"
    second.rename(tmp_path / "later")  # the second transfer not here yet
    rep = run.install(bundle)
    assert rep["installed_now"] == ["1"] and rep["absent"] == ["2"]
    assert (bundle / "site" / "alpha_pkg.py").is_file()
    (tmp_path / "later").rename(second)  # it arrives
    rep = run.install(bundle)
    assert rep["installed_now"] == ["2"] and rep["already"] == ["1"] and rep["absent"] == []
    assert (bundle / "site" / "beta_pkg.py").is_file()
    assert build.check(bundle) == []


def test_install_refuses_a_changed_wheel(tmp_path):
    bundle = _bundle(tmp_path)
    w = next((bundle / "part2").glob("*.whl"))
    w.write_bytes(w.read_bytes() + b"x")
    with pytest.raises(run.BundleError, match="sha256"):
        run.install(bundle)
    assert any("differs" in p for p in build.check(bundle))


def test_environment_finds_stand_in_before_bundle(tmp_path):
    env = run.environment(tmp_path, base={"PYTHONPATH": "/elsewhere"})
    paths = env["PYTHONPATH"].split(os.pathsep)
    assert paths[:2] == [str(REPO), str(REPO / "gpu_bundle" / "site")]
    assert paths[-1] == "/elsewhere"
    assert env["SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND"] == "python"
    assert env["SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK"] == "1"


def test_dry_run_needs_bundle():
    with pytest.raises(SystemExit) as exc:
        gpu_check.parse(["--dry-run"])
    assert exc.value.code == 2


_FACADE = r"""
import sys, torch
import sgl_kernel
assert sgl_kernel.STAND_IN, sgl_kernel.__file__
from sgl_kernel import rmsnorm, silu_and_mul, flash_mla_decode
from sgl_kernel.kvcacheio import transfer_kv_direct
from sgl_kernel.scalar_type import scalar_types
from sgl_kernel.utils import is_arch_support_pdl
assert is_arch_support_pdl() is False
gptq = [scalar_types.uint4b8, scalar_types.uint8b128]   # module-level use in SGLang
x = torch.randn(2, 8)
assert torch.allclose(silu_and_mul(x), torch.nn.functional.silu(x[:, :4]) * x[:, 4:])
for stub in (flash_mla_decode, transfer_kv_direct):
    try:
        stub(1)
    except NotImplementedError as exc:
        assert "not implemented by the gpu_bundle" in str(exc)
    else:
        raise AssertionError("a stub returned")
assert sgl_kernel.CALLED_STUBS == ["sgl_kernel.flash_mla_decode", "sgl_kernel.kvcacheio.transfer_kv_direct"]
lib = torch.library.Library("sgl_kernel", "FRAGMENT")
lib.define("probe_twice_cpu(Tensor x) -> Tensor")
lib.impl("probe_twice_cpu", lambda t: t * 2, "CPU")
from sgl_kernel import probe_twice_cpu
assert torch.equal(probe_twice_cpu(torch.ones(2)), torch.full((2,), 2.0))
w = torch.ones(3)
assert sgl_kernel.weak_ref_tensor(w).data_ptr() == w.data_ptr()
print("facade ok")
"""


def test_stand_in_sgl_kernel_package():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "gpu_bundle" / "site"), str(REPO)]))
    proc = subprocess.run([sys.executable, "-c", _FACADE], env=env, capture_output=True, text=True, timeout=120, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "facade ok" in proc.stdout


_PRELOAD = r"""
import gpu_bundle.preload as pre
import sglang.kernels.ops.speculative.tree as tree
import sglang.kernels.ops.speculative.sampling as sampling
from gpu_bundle.ops import spec_sampling, spec_tree
routed = tree.verify_tree_greedy is spec_tree.verify_tree_greedy and tree.build_tree_kernel_efficient is spec_tree.build_tree_kernel_efficient
sampled = sampling.tree_speculative_sampling_target_only is spec_sampling.tree_speculative_sampling_target_only
print("routed" if routed else "jit", "routed" if sampled else "jit", pre.APPLIED)
"""


@pytest.mark.sglang
@pytest.mark.parametrize("mode,want", [("torch", "routed"), ("jit", "jit")])
def test_preload_routes_the_jit_tree_kernels(mode, want):
    env = dict(os.environ, PYTHONPATH=str(REPO), SPECCONSOLE_GPU_BUNDLE_TREE=mode)
    proc = subprocess.run([sys.executable, "-c", _PRELOAD], env=env, capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split()[:2] == [want, want]


# The bare image has neither cutlass (nvidia-cutlass-dsl) nor flash_mla, nor an
# "sglang-kernel" distribution: a child blocks those imports and hides that distribution,
# as the H200's image did (2026-12-04: the plain server died importing cutlass, the patched
# one importing flash_mla, both first on SGLang's sglang-kernel version check).
_BARE_IMAGE = r"""
import importlib.abc, importlib.metadata, sys
class Bare(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("cutlass", "flash_mla"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Bare())
real_version = importlib.metadata.version
def version(name):
    if name == "sglang-kernel":
        raise importlib.metadata.PackageNotFoundError(name)
    return real_version(name)
importlib.metadata.version = version
import sglang.srt.utils.common as common
common.version = version
def attempt(what, fn):
    try:
        fn()
        print(what, "ok")
    except NotImplementedError as exc:
        print(what, "stand-in", exc)
    except Exception as exc:
        print(what, "failed", type(exc).__name__, exc)
def dual():
    from sglang.kernels.ops.gemm.cutedsl_dual_gemm import DualGemmQuantMode, can_use_dual_gemm, MAX_DUAL_GEMM_DECODE_TOKENS
    assert DualGemmQuantMode.UNQUANT == 4 and not DualGemmQuantMode.UNQUANT.is_quantized
    assert can_use_dual_gemm(1, 64, 128, DualGemmQuantMode.UNQUANT) is False
def flashmla():
    from sglang.srt.layers.attention.flashmla_backend import FlashMLABackend
    assert not isinstance(object(), FlashMLABackend)
    FlashMLABackend()
attempt("dual_gemm", dual)
attempt("flashmla", flashmla)
attempt("version", lambda: common.assert_pkg_version("sglang-kernel", "0.4.9", ""))
"""


@pytest.mark.sglang
@pytest.mark.parametrize("bridged", [True, False])
def test_the_bare_images_missing_modules_are_stood_in_for(bridged):
    base = {k: v for k, v in os.environ.items() if k not in run.BRIDGE_ENV and k != "PYTHONPATH"}
    env = run.environment(Path("/nonexistent-bundle"), base=base) if bridged else dict(base, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-c", _BARE_IMAGE], env=env, capture_output=True, text=True, timeout=300, cwd=str(REPO)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    if bridged:
        assert said["dual_gemm"] == "ok", said
        assert said["flashmla"].startswith("stand-in") and "no flash_mla in the GPU bundle" in said["flashmla"], said
        assert said["version"] == "ok", said
    else:  # the control: the image as it is fails all three
        assert said["dual_gemm"].startswith("failed ModuleNotFoundError") and "cutlass" in said["dual_gemm"], said
        assert said["flashmla"].startswith("failed ModuleNotFoundError") and "flash_mla" in said["flashmla"], said
        assert said["version"].startswith("failed Exception") and "not installed" in said["version"], said


def test_gpu_check_bundle_stops_while_a_part_is_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(run.READY, raising=False)
    bundle = _bundle(tmp_path)
    (bundle / "part2").rename(tmp_path / "later")
    assert gpu_check.main(["--bundle", str(bundle)]) == 1
    out = capsys.readouterr().out
    assert "FAIL bundle: bundle parts not here yet: ['2']" in out
    assert (bundle / "site" / "alpha_pkg.py").is_file()  # part1 installed meanwhile
