"""``scripts/gpu-check --bundle DIR``: install a built bundle on a bare image, then run the
checks in an environment that finds it (not part of the product).

DIR holds ``manifest.json`` and ``part1/``, ``part2/`` (scripts/build-gpu-bundle). The
wheels of every part present are verified against the manifest (size, sha256) and
installed with ``pip install --no-index --no-deps --target DIR/site``; a part already
installed (its name in ``DIR/site/.parts``) is not installed again, so part1 can arrive and
be installed in one transfer and part2 in the next. The environment then puts the repo,
``gpu_bundle/site`` (the stand-in ``sgl_kernel``) and ``DIR/site`` on ``PYTHONPATH`` and
sets the flags the image's torch needs (``BRIDGE_ENV``); the patched server's bootstrap
imports ``gpu_bundle.preload`` in every process (the tree kernels' stand-ins).

``--dry-run`` stops before any server: it imports, in a child with that environment, what
SGLang's server and gpu-check's configuration import (``DRY_IMPORTS``), checks the
stand-in is the ``sgl_kernel`` found, reads the versions, and writes the summary.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SITE_STAND_IN = REPO / "gpu_bundle" / "site"
# sglang 0.5.23's Rust radix-tree core (mem_cache.so) is built with tch against torch
# 2.14.1's libtorch; under torch 2.11 it loads but reads tensors wrong ("Rust TreeCore
# panicked: ... UnknownKind(27)"). SGLang's own pure-Python tree core is selected instead.
# The stand-in sgl_kernel has no "sglang-kernel" distribution for SGLang's version check
# (engine._set_envs_and_config asserts sglang-kernel >= 0.4.9 on CUDA): SGLang's own switch.
BRIDGE_ENV = {"SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND": "python", "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK": "1"}
READY = "SPECCONSOLE_GPU_BUNDLE_READY"
DRY_IMPORTS = (
    "sglang.launch_server",
    "sglang.srt.entrypoints.http_server",
    "sglang.srt.managers.scheduler",
    "sglang.srt.managers.tokenizer_manager",
    "sglang.srt.managers.detokenizer_manager",
    "sglang.srt.speculative.eagle_worker_v2",
    "sglang.srt.speculative.eagle_draft_cuda_graph_runner",
    "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner",
    "sglang.srt.layers.attention.triton_backend",
    "sglang.srt.layers.layernorm",
    "sglang.srt.layers.activation",
    "sglang.srt.layers.sampler",
    "sglang.srt.layers.rotary_embedding",
    "sglang.srt.models.llama",
    "sglang.srt.models.llama_eagle3",
    "sglang.kernels.ops.speculative.spec_tree",
    "sglang.srt.model_executor.model_runner",
    "sglang.srt.mem_cache.unified_radix_cache",
    "server_control.sglang_patch.serve",
    "tvm_ffi",
    "xgrammar",
    "msgspec",
    "fastapi",
    "uvicorn",
    "orjson",
    "zmq",
)


class BundleError(RuntimeError):
    pass


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def install(bundle: Path, python: str = sys.executable) -> dict:
    """Verify and install every part present (once each); returns what was done."""
    try:
        manifest = json.loads((bundle / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{bundle}/manifest.json: {exc}") from None
    site = bundle / "site"
    site.mkdir(exist_ok=True)
    done_file = site / ".parts"
    done = set(done_file.read_text().split()) if done_file.is_file() else set()
    report: dict = {"installed_now": [], "already": sorted(done), "absent": []}
    for part in sorted({str(e["part"]) for e in manifest["wheels"]}):
        entries = [e for e in manifest["wheels"] if str(e["part"]) == part]
        folder = bundle / f"part{part}"
        if part in done:
            continue
        if not folder.is_dir():
            report["absent"].append(part)
            continue
        for e in entries:
            path = folder / e["file"]
            if not path.is_file():
                raise BundleError(f"{path}: listed in manifest.json, missing")
            if path.stat().st_size != e["bytes"] or _sha256(path) != e["sha256"]:
                raise BundleError(f"{path}: size or sha256 differs from manifest.json")
        cmd = [
            python,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-deps",
            "--no-compile",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--upgrade",
            "--target",
            str(site),
            *(str(folder / e["file"]) for e in entries),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise BundleError(f"pip install of part{part} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        done.add(part)
        done_file.write_text("\n".join(sorted(done)) + "\n")
        report["installed_now"].append(part)
    report["wheels"] = len(manifest["wheels"])
    return report


def environment(bundle: Path, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    paths = [str(REPO), str(SITE_STAND_IN), str((bundle / "site").resolve())]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(BRIDGE_ENV)
    env.setdefault("SPECCONSOLE_SGLANG_PRELOAD", "gpu_bundle.preload")
    env.update({READY: "1", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    return env


_PROBE = r"""
import importlib, json, shutil, sys
out = {"python": sys.version.split()[0], "imports": {}, "versions": {}}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
        out["imports"][name] = "ok"
    except BaseException as exc:
        out["imports"][name] = f"{type(exc).__name__}: {exc}"[:500]
for name in ("torch", "triton", "transformers", "sglang", "sgl_kernel", "tvm_ffi", "xgrammar"):
    mod = sys.modules.get(name) or importlib.import_module(name)
    out["versions"][name] = getattr(mod, "__version__", "?")
import sgl_kernel, torch
out["sgl_kernel_file"] = sgl_kernel.__file__
out["sgl_kernel_stand_in"] = bool(getattr(sgl_kernel, "STAND_IN", False))
out["cuda_available"] = torch.cuda.is_available()
out["nvcc"] = shutil.which("nvcc")
print(json.dumps(out))
"""


def probe(env: dict, python: str = sys.executable, timeout: float = 600) -> dict:
    proc = subprocess.run(
        [python, "-c", _PROBE, *DRY_IMPORTS], env=env, capture_output=True, text=True, timeout=timeout, cwd=str(REPO)
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise BundleError(f"import probe failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def dry_run(bundle: Path, summary: Path | None) -> int:
    """Every step up to the GPU; prints one line per step; 0 when all passed."""
    results: list[dict] = []

    def step(name: str, ok: bool, detail: str) -> None:
        results.append({"name": name, "ok": ok, "detail": detail})
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")

    try:
        rep = install(bundle)
        step(
            "install bundle",
            not rep["absent"],
            f"{rep['wheels']} wheels; parts installed now {rep['installed_now']}, before "
            f"{rep['already']}, absent {rep['absent']}",
        )
        env = environment(bundle)
        info = probe(env)
        bad = {k: v for k, v in info["imports"].items() if v != "ok"}
        step(
            "imports",
            not bad,
            f"{len(info['imports']) - len(bad)}/{len(info['imports'])} modules" + (f"; failed: {bad}" if bad else ""),
        )
        stand_in = info["sgl_kernel_stand_in"] and info["sgl_kernel_file"].startswith(str(SITE_STAND_IN))
        step("stand-in sgl_kernel", stand_in, info["sgl_kernel_file"])
        v = info["versions"]
        step("versions", v.get("sglang") == "0.5.23", f"python {info['python']}, " + ", ".join(f"{k} {x}" for k, x in v.items()))
        step("gpu (not part of the dry run)", True, f"CUDA available: {info['cuda_available']}; nvcc: {info['nvcc']}")
    except (BundleError, subprocess.TimeoutExpired) as exc:
        step("bundle", False, str(exc)[:2000])
    ok = all(r["ok"] for r in results)
    print(
        f"gpu-check --bundle --dry-run: {'all passed' if ok else 'FAILED'} ({sum(r['ok'] for r in results)}/{len(results)} steps)"
    )
    if summary:
        summary.write_text(json.dumps({"dry_run": True, "ok": ok, "steps": results}, indent=1))
    return 0 if ok else 1


def reexec(bundle: Path, argv: list[str]) -> None:
    """Install, then replace this process with gpu-check in the bundle's environment."""
    rep = install(bundle)
    if rep["absent"]:
        raise BundleError(f"bundle parts not here yet: {rep['absent']} (each part's folder {bundle}/partN)")
    env = environment(bundle)
    os.execve(sys.executable, [sys.executable, "-m", "tests.real_sglang.rig.gpu_check", *argv], env)
