"""Imported first in every process of a rig server (test rig only).

Named in ``SPECCONSOLE_SGLANG_PRELOAD`` (the patch's bootstrap imports it in every Python
process started with its PYTHONPATH) or imported by ``launch.py``. Once SGLang's
``sglang.srt.runtime_context`` has been imported in a process, it
  1. registers the pure-torch ``sgl_kernel`` CPU operators (``cpu_ops``), and
  2. tells SGLang this CPU has AMX (``override_platform(has_amx=True)``), so
     ``--attention-backend intel_amx`` (the only backend the CPU EAGLE draft worker
     accepts) is not downgraded to torch_native. Only ``get_platform().has_amx`` reads
     the override; layer code keeps its plain torch paths.
Processes that never import SGLang (multiprocessing's resource tracker, tools) pay
nothing: no torch import happens here. With ``SPECCONSOLE_RIG_OVERLAP=1`` it also lets the
overlap scheduler run speculative decoding on the CPU (``overlap.py``). With
``SPECCONSOLE_RIG_TP_FAULTS`` it installs the tp rig's faults (``tp_faults.py``). With
``SPECCONSOLE_RIG_STEP_TIMING=DIR`` it times forwards, draft-extend and the scheduler's
decode steps (``step_timing.py``); with ``SPECCONSOLE_RIG_SKIP_DRAFT_EXTEND_FILE=PATH``
SGLang skips draft-extend at target-only steps while PATH exists (``skip_draft_extend.py``); with ``SPECCONSOLE_RIG_OP_PROFILE=DIR`` it profiles the
target's forwards op by op (``op_profile.py``).

At import it also loads the stand-in ``libcuda.so.1`` (``RTLD_GLOBAL``) named by
``SPECCONSOLE_RIG_LIB`` (default: ``<rig cache>/current/lib/libcuda.so.1``), unless a
libcuda.so.1 can already be found: sgl-kernel's later ``dlopen`` of that soname then gets
this one, so no ``LD_LIBRARY_PATH`` is needed.
"""

from __future__ import annotations

import ctypes
import importlib.abc
import os
import sys

TRIGGER = "sglang.srt.runtime_context"
APPLIED: list[str] = []


def apply(module=None) -> None:
    """Register the operators and install the platform override (idempotent)."""
    if APPLIED:
        return
    from sglang.srt.runtime_context import override_platform

    from tests.real_sglang.rig import cpu_ops

    APPLIED.extend(cpu_ops.register())
    override_platform(has_amx=True).install()
    APPLIED.append("has_amx")


def _after_import() -> dict:
    """module name -> what to run right after that module executed."""
    hooks = {TRIGGER: apply}
    if os.environ.get("SPECCONSOLE_RIG_OVERLAP") == "1":
        from tests.real_sglang.rig import overlap

        hooks.update(overlap.AFTER_IMPORT)
    if os.environ.get("SPECCONSOLE_RIG_STEP_TIMING"):
        from tests.real_sglang.rig import step_timing

        _merge(hooks, step_timing.AFTER_IMPORT)
    if os.environ.get("SPECCONSOLE_RIG_SEEDED_SAMPLING") == "1":
        from tests.real_sglang.rig import seeded_sampling

        _merge(hooks, seeded_sampling.AFTER_IMPORT)
    if os.environ.get("SPECCONSOLE_RIG_SKIP_DRAFT_EXTEND_FILE"):
        from tests.real_sglang.rig import skip_draft_extend

        _merge(hooks, skip_draft_extend.AFTER_IMPORT)
    if os.environ.get("SPECCONSOLE_RIG_OP_PROFILE"):
        from tests.real_sglang.rig import op_profile

        _merge(hooks, op_profile.AFTER_IMPORT)
    return hooks


def _merge(hooks: dict, more: dict) -> None:
    """Add ``more`` to ``hooks``; two hooks of one module both run, in order."""
    for name, hook in more.items():
        first = hooks.get(name)
        hooks[name] = hook if first is None else (lambda module, _a=first, _b=hook: (_a(module), _b(module)))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs the hook of a module of ``hooks`` right after that module finished executing."""

    def __init__(self, hooks: dict) -> None:
        self.hooks = hooks

    def find_spec(self, fullname, path, target=None):
        hook = self.hooks.get(fullname)
        if hook is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                exec_module = spec.loader.exec_module

                def exec_and_apply(module, _exec=exec_module, _hook=hook):
                    _exec(module)
                    _hook(module)

                spec.loader.exec_module = exec_and_apply
                return spec
        return None


def _stand_in_libcuda() -> str:
    path = os.environ.get("SPECCONSOLE_RIG_LIB")
    if not path:
        cache = os.environ.get("SPECCONSOLE_RIG_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "specconsole-rig")
        path = os.path.join(cache, "current", "lib")
    return os.path.join(path, "libcuda.so.1") if os.path.isdir(path) else path


def load_libcuda() -> str | None:
    """Load the stand-in library; returns its path, or None when not needed/found."""
    try:
        ctypes.CDLL("libcuda.so.1", mode=ctypes.RTLD_GLOBAL)
        return None  # a real driver, or the stand-in through LD_LIBRARY_PATH
    except OSError:
        pass
    path = _stand_in_libcuda()
    if not os.path.isfile(path):
        sys.stderr.write(
            f"rig preload: no libcuda.so.1 and no stand-in at {path}; run `python -m tests.real_sglang.rig.build` first\n"
        )
        return None
    ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
    return path


LIBCUDA = load_libcuda()

if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
    _HOOKS = _after_import()
    for _name in [n for n in _HOOKS if n in sys.modules]:
        _HOOKS.pop(_name)(sys.modules[_name])
    sys.meta_path.insert(0, _AfterImport(_HOOKS))

if os.environ.get("SPECCONSOLE_RIG_TP_FAULTS"):
    from tests.real_sglang.rig import tp_faults

    tp_faults.install()
