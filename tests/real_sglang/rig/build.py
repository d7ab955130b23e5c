"""Build (once, cached) what a CPU SGLang EAGLE-3 server needs (test rig only).

Cache: ``$SPECCONSOLE_RIG_CACHE`` or ``~/.cache/specconsole-rig``; a subdirectory per hash
of the rig's generator sources, so an edit rebuilds. Contents:
  lib/libcuda.so.1          the stand-in driver library (fake_libcuda.c, system cc)
  models/target, models/draft   tiny constant Llama + EAGLE-3 draft, local tokenizer
  rig.json                  facts (constant token, paths)
and ``<cache>/current``, a symlink to the latest build (what the shipped profile
``assets/profiles/cpu-tiny-eagle3.toml`` uses as its working directory).

``python -m tests.real_sglang.rig.build`` builds and prints rig.json, plus the server
environment with ``--env``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

RIG_DIR = Path(__file__).resolve().parent
REPO_ROOT = RIG_DIR.parents[2]
PRELOAD_MODULE = "tests.real_sglang.rig.preload"
NO_NCCL = "/nonexistent/no-nccl-on-cpu/libnccl.so.2"
_SOURCES = (
    "fake_libcuda.c",
    "tiny_models.py",
    "trained_models.py",
    "build.py",
    "data/trained/target.safetensors",
    "data/trained/draft.safetensors",
)
KEEP_UNUSED_S = 2 * 86400  # other rig versions unused this long are deleted
MODEL_KINDS = ("trained", "random")


@dataclass(frozen=True)
class ModelPair:
    """A target + EAGLE-3 draft checkpoint pair of the rig."""

    kind: str
    target: Path
    draft: Path
    facts: dict


@dataclass(frozen=True)
class Rig:
    root: Path
    lib_dir: Path
    target: Path
    draft: Path
    constant_token_id: int
    constant_text: str


def cache_root() -> Path:
    base = os.environ.get("SPECCONSOLE_RIG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "specconsole-rig")
    return Path(base)


def _stamp() -> str:
    h = hashlib.sha256()
    for name in _SOURCES:
        h.update((RIG_DIR / name).read_bytes())
    return h.hexdigest()[:12]


def _compile_libcuda(lib_dir: Path) -> None:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RuntimeError(
            "the rig needs a C compiler (cc or gcc) to build the stand-in libcuda.so.1; install build-essential or set CC"
        )
    lib_dir.mkdir(parents=True, exist_ok=True)
    out = lib_dir / "libcuda.so.1"
    cmd = [cc, "-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o", str(out), str(RIG_DIR / "fake_libcuda.c")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"building the stand-in libcuda.so.1 failed: {' '.join(cmd)}\n{res.stderr}")


def _load(root: Path) -> Rig:
    facts = json.loads((root / "rig.json").read_text())
    return Rig(
        root=root,
        lib_dir=root / "lib",
        target=root / "models" / "target",
        draft=root / "models" / "draft",
        constant_token_id=facts["constant_token_id"],
        constant_text=facts["constant_text"],
    )


def ensure_rig() -> Rig:
    """The built rig, building it first when the cache lacks this version."""
    root = cache_root() / _stamp()
    if (root / "rig.json").is_file():
        os.utime(root / "rig.json")  # in use: _prune() in another worktree keeps it
        _point_current(root)
        return _load(root)

    def build(tmp: Path) -> dict:
        from . import tiny_models

        _compile_libcuda(tmp / "lib")
        return tiny_models.build(tmp / "models" / "target", tmp / "models" / "draft")

    _build_into(root, "rig.json", build)
    _point_current(root)
    _prune(root)
    return _load(root)


def _build_into(root: Path, facts_file: str, build) -> None:
    """``build(tmp)`` in a temporary sibling directory, its facts into ``facts_file``, then
    renamed to ``root`` in one step (a concurrent builder's result wins, intact)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{root.name}-", dir=root.parent))
    try:
        (tmp / facts_file).write_text(json.dumps(build(tmp), indent=1))
        try:
            tmp.rename(root)
        except OSError:  # built concurrently by another process: use theirs
            if not (root / facts_file).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(keep: Path) -> None:
    """Delete other rig versions nobody used for KEEP_UNUSED_S (another worktree may still
    run servers from a version of its own: deleting it at once would break them)."""
    now = time.time()
    for old in keep.parent.iterdir():
        if old == keep or len(old.name) != 12 or not old.is_dir() or old.is_symlink():
            continue
        try:
            unused = now - (old / "rig.json").stat().st_mtime
        except OSError:
            unused = KEEP_UNUSED_S + 1
        if unused > KEEP_UNUSED_S:
            shutil.rmtree(old, ignore_errors=True)


def ensure_models(rig: Rig, kind: str) -> ModelPair:
    """The rig's ``kind`` pair ("trained": period-k language, from the weights kept as test
    data, checked, ~3 s; "random": random weights), built once into ``<rig>/models/<kind>``."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"model kind must be one of {MODEL_KINDS}, got {kind!r}")
    root = rig.root / "models" / kind

    def build(tmp: Path) -> dict:
        if kind == "trained":
            from . import trained_models

            return trained_models.build(tmp / "target", tmp / "draft")
        from . import tiny_models

        return tiny_models.build(tmp / "target", tmp / "draft", constant=False, seed=1)

    if not (root / "facts.json").is_file():
        _build_into(root, "facts.json", build)
    facts = json.loads((root / "facts.json").read_text())
    return ModelPair(kind=kind, target=root / "target", draft=root / "draft", facts=facts)


def _point_current(root: Path) -> None:
    """Atomically make ``<cache>/current`` point at ``root``."""
    link = root.parent / "current"
    try:
        if link.is_symlink() and os.readlink(link) == root.name:
            return
        tmp = root.parent / f".current-{os.getpid()}"
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(root.name)
        os.replace(tmp, link)
    except OSError:
        pass  # a read-only cache still works through absolute paths


def server_env(rig: Rig, base: dict | None = None, overlap: bool = False) -> dict:
    """Environment for a rig server process (any launcher)."""
    env = dict(os.environ if base is None else base)
    env.update(rig_env_vars(rig, overlap))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def rig_env_vars(rig: Rig, overlap: bool = False) -> dict:
    """The variables a rig server needs (a profile's [env] table); ``overlap``: let the
    overlap scheduler run speculative decoding on the CPU (rig/overlap.py)."""
    return {
        **({"SPECCONSOLE_RIG_OVERLAP": "1"} if overlap else {}),
        "SGLANG_USE_CPU_ENGINE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0",
        # a stop SIGTERMs the whole group: the scheduler dies first, SGLang's watchdog takes
        # that for a crash and sleeps 5 s before a py-spy dump: ~6 s of every rig stop
        "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
        # SGLang torch.compile()s a draft helper; compiling it on CPU costs ~25 s of
        # start-up (first request) and needs a C++ toolchain. Eager is exact and enough.
        "TORCHDYNAMO_DISABLE": "1",
        "SPECCONSOLE_SGLANG_PRELOAD": PRELOAD_MODULE,
        "SPECCONSOLE_RIG_LIB": str(rig.lib_dir / "libcuda.so.1"),
        # tp > 1: the CUDA wheel's NCCL would load and then demand a CUDA device; a path
        # that does not exist makes SGLang skip PyNccl and use gloo on the CPU group.
        "SGLANG_NCCL_SO_PATH": NO_NCCL,
    }


def omp_bind(tp: int) -> str:
    """SGLANG_CPU_OMP_THREADS_BIND for ``tp`` ranks on one NUMA node: the usable cores
    split into ``tp`` groups (SGLang refuses tp > NUMA nodes without it)."""
    cores = sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // tp)
    groups = []
    for r in range(tp):
        part = cores[r * per : (r + 1) * per] or cores[-1:]
        contiguous = part == list(range(part[0], part[-1] + 1))
        groups.append(f"{part[0]}-{part[-1]}" if contiguous and len(part) > 1 else ",".join(map(str, part)))
    return "|".join(groups)


CPU_ARGS = [
    "--device",
    "cpu",
    "--attention-backend",
    "intel_amx",
    "--sampling-backend",
    "pytorch",
    "--disable-overlap-schedule",
    "--disable-cuda-graph",
    "--max-total-tokens",
    "4096",
]


def server_args(
    rig: Rig,
    port: int,
    steps: int = 2,
    tp: int = 1,
    extra: list | None = None,
    models: ModelPair | None = None,
    speculative: bool = True,
    overlap: bool = False,
) -> list[str]:
    """launch_server arguments for a rig pair on this CPU (topk 1); ``models`` None = the
    constant pair; ``speculative=False``: the target alone (a plain server); ``overlap``:
    SGLang's overlap scheduler (needs ``rig_env_vars(..., overlap=True)``)."""
    cpu = [a for a in CPU_ARGS if not (overlap and a == "--disable-overlap-schedule")]
    target, draft = (rig.target, rig.draft) if models is None else (models.target, models.draft)
    spec = (
        [
            "--speculative-algorithm",
            "EAGLE3",
            "--speculative-draft-model-path",
            str(draft),
            "--speculative-num-steps",
            str(steps),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(steps + 1),
        ]
        if speculative
        else []
    )
    return [
        "--model-path",
        str(target),
        *spec,
        "--tp-size",
        str(tp),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *cpu,
        *(extra or []),
    ]


def main(argv: list[str]) -> int:
    rig = ensure_rig()
    out = {
        "root": str(rig.root),
        "target": str(rig.target),
        "draft": str(rig.draft),
        "lib_dir": str(rig.lib_dir),
        "constant_token_id": rig.constant_token_id,
        "constant_text": rig.constant_text,
    }
    if "--env" in argv:
        out["env"] = rig_env_vars(rig)
    for kind in MODEL_KINDS:
        if f"--{kind}" in argv:
            pair = ensure_models(rig, kind)
            out[kind] = {"target": str(pair.target), "draft": str(pair.draft), **pair.facts}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
