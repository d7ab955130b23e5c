"""Import hook: apply each part of the patch when SGLang imports the module it patches.

``install()`` puts a meta path finder first on ``sys.meta_path``. When one of the target
modules is imported, the finder wraps its loader so that our callback runs around the
module's own code:

  * before ``sglang.srt.server_args`` executes: run the gate (version + anchors) and wrap
    ``collect_input_fields`` so the four new fields join ``ServerArgs`` as it is built
    (``msgspec.defstruct`` at import time). This also runs when a spawned process
    unpickles a ServerArgs: unpickling imports the class by reference first;
  * after ``sglang.srt.utils.common``: wrap ``configure_logger`` so a pending
    ``NOT active`` line is written with SGLang's format and rank prefix;
  * after ``sglang.srt.speculative.eagle_worker_v2``: patch ``EAGLEWorkerV2``;
  * after ``...scheduler_components.internal_state``: patch the internal-state controller.

A target already imported when ``install()`` runs is patched at once (``server_args``
cannot be: its struct is built; that is reported as NOT active).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading

from server_control.sglang_patch import gate

SERVER_ARGS = "sglang.srt.server_args"
COMMON = "sglang.srt.utils.common"
EAGLE = "sglang.srt.speculative.eagle_worker_v2"
INTERNAL_STATE = "sglang.srt.managers.scheduler_components.internal_state"

_lock = threading.RLock()
_state = {"installed": False, "gate": None, "gate_checked": False, "applied": set()}


def gate_reason() -> str | None:
    """The gate's verdict for this process (computed once)."""
    with _lock:
        if not _state["gate_checked"]:
            _state["gate"] = gate.check()
            _state["gate_checked"] = True
            if _state["gate"] is not None:
                gate.not_active(_state["gate"])
        return _state["gate"]


def _before(name: str) -> None:
    if name == SERVER_ARGS and gate_reason() is None:
        from server_control.sglang_patch import fields
        fields.wrap_collect_input_fields()


def _after(name: str, module) -> None:
    if name == COMMON:
        _wrap_configure_logger(module)  # logging only: even when the gate says no
        return
    if gate_reason() is not None:
        return
    try:
        if name == SERVER_ARGS:
            from server_control.sglang_patch import fields
            fields.check_server_args(module)
        elif name == EAGLE:
            from server_control.sglang_patch import worker
            worker.patch(module)
        elif name == INTERNAL_STATE:
            from server_control.sglang_patch import internal_state
            internal_state.patch(module)
    except Exception as exc:  # noqa: BLE001 - never break SGLang's import
        gate.not_active(f"patching {name} failed: {exc!r}")
    _state["applied"].add(name)


def _wrap_configure_logger(module) -> None:
    original = getattr(module, "configure_logger", None)
    if original is None or getattr(original, "_specconsole", False):
        return

    def configure_logger(*args, **kwargs):
        result = original(*args, **kwargs)
        gate.flush()
        return result

    configure_logger._specconsole = True
    configure_logger.__wrapped__ = original
    configure_logger.__doc__ = original.__doc__
    module.configure_logger = configure_logger


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        _before(self._name)
        self._loader.exec_module(module)
        _after(self._name, module)

    def __getattr__(self, item):  # get_source, get_code, is_package, ... for inspect
        return getattr(self._loader, item)


class PatchFinder(importlib.abc.MetaPathFinder):
    TARGETS = (SERVER_ARGS, COMMON, EAGLE, INTERNAL_STATE)

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname, path, target=None):
        if fullname not in self.TARGETS or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy.discard(fullname)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _HookedLoader(spec.loader, fullname)
        return spec


def install() -> bool:
    """Install the hook (idempotent). Returns True when it was installed by this call."""
    with _lock:
        if _state["installed"]:
            return False
        _state["installed"] = True
        sys.meta_path.insert(0, PatchFinder())
    for name in PatchFinder.TARGETS:
        module = sys.modules.get(name)
        if module is None:
            continue
        if name == SERVER_ARGS:
            if gate_reason() is None:
                from server_control.sglang_patch import fields
                fields.check_server_args(module)
            continue
        _after(name, module)
    return True


def installed() -> bool:
    return _state["installed"]
