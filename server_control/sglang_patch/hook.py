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
  * after ``...scheduler_components.internal_state``: patch the internal-state controller;
  * after ``...scheduler_components.batch_result_processor``: let the worker see which
    step a verify result came from (``worker.settling``);
  * after ``sglang.srt.observability.metrics_collector``: the patch's metrics.

Fail mode (the gate says no): when the anchors of the report-only parts are there
(``gate.report_parts_missing()`` is None) the fields are still added and the
internal-state controller reports ``active: false`` with the reason: the flags parse and
the server starts with the switch off. Otherwise, in the process that ``serve`` started,
the four flags are taken off ``sys.argv`` before SGLang parses it (one line names them),
so the server still starts. Either way one ``NOT active`` line gives the reason.

A target already imported when ``install()`` runs is patched at once (``server_args``
cannot be: its struct is built; that is reported as NOT active).
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from typing import Any

from server_control.sglang_patch import gate

SERVER_ARGS = "sglang.srt.server_args"
COMMON = "sglang.srt.utils.common"
EAGLE = "sglang.srt.speculative.eagle_worker_v2"
INTERNAL_STATE = "sglang.srt.managers.scheduler_components.internal_state"
RESULTS = "sglang.srt.managers.scheduler_components.batch_result_processor"
METRICS = "sglang.srt.observability.metrics_collector"

FULL, REPORT, OFF = "full", "report", "off"

_lock = threading.RLock()
_state: dict[str, Any] = {"installed": False, "gate": None, "mode": None, "applied": set(),
          "serve_main": False}


def gate_reason() -> str | None:
    """The gate's verdict for this process (computed once)."""
    return _gate()[0]


def mode() -> str:
    """``full`` (the switch), ``report`` (flags + the reason in /server_info) or ``off``."""
    return _gate()[1]


def _gate() -> tuple[str | None, str]:
    with _lock:
        if _state["mode"] is None:
            reason = gate.check()
            _state["gate"] = reason
            if reason is None:
                _state["mode"] = FULL
            else:
                gate.not_active(reason)
                _state["mode"] = REPORT if gate.report_parts_missing() is None else OFF
        return _state["gate"], _state["mode"]


def mark_serve_main() -> None:
    """This is the launch_server process ``serve`` started (the bootstrap says so). If
    server_args was imported before the hook (a ``.pth`` file in site-packages runs before
    any sitecustomize), its ServerArgs lacks the fields: take the flags off sys.argv now."""
    _state["serve_main"] = True
    module = sys.modules.get(SERVER_ARGS)
    if module is not None:
        from server_control.sglang_patch import fields
        if mode() == OFF or fields.missing_fields(module.ServerArgs):
            fields.drop_flags_from_argv(sys.argv)


def _before(name: str) -> None:
    if name == SERVER_ARGS and mode() != OFF:
        from server_control.sglang_patch import fields
        fields.wrap_collect_input_fields()


def _after(name: str, module: Any) -> None:
    if name == COMMON:
        _wrap_configure_logger(module)  # logging only: even when the gate says no
        return
    current = mode()
    try:
        if name == SERVER_ARGS:
            from server_control.sglang_patch import fields
            if not (current != OFF and fields.check_server_args(module)) and _state["serve_main"]:
                fields.drop_flags_from_argv(sys.argv)
        elif name == INTERNAL_STATE and current != OFF:
            from server_control.sglang_patch import internal_state
            internal_state.patch(module, off_reason=None if current == FULL else gate_reason())
        elif current != FULL:
            return
        elif name == EAGLE:
            from server_control.sglang_patch import target_only_sampling, worker
            worker.patch(module)
            target_only_sampling.patch()
        elif name == RESULTS:
            from server_control.sglang_patch import worker
            worker.patch_results(module)
        elif name == METRICS:
            from server_control.sglang_patch import metrics
            metrics.patch(module)
    except Exception as exc:  # noqa: BLE001 - never break SGLang's import
        gate.not_active(f"patching {name} failed: {exc!r}")
    _state["applied"].add(name)


def _wrap_configure_logger(module: Any) -> None:
    original = getattr(module, "configure_logger", None)
    if original is None or getattr(original, "_specconsole", False):
        return

    def configure_logger(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        gate.flush()
        return result

    configure_logger._specconsole = True  # type: ignore[attr-defined]
    configure_logger.__wrapped__ = original  # type: ignore[attr-defined]
    configure_logger.__doc__ = original.__doc__
    module.configure_logger = configure_logger


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        _before(self._name)
        self._loader.exec_module(module)
        _after(self._name, module)

    def __getattr__(self, item: Any) -> Any:  # get_source, get_code, is_package, ... for inspect
        return getattr(self._loader, item)


class PatchFinder(importlib.abc.MetaPathFinder):
    TARGETS = (SERVER_ARGS, COMMON, EAGLE, INTERNAL_STATE, RESULTS, METRICS)

    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: Any, path: Any, target: Any=None) -> Any:
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
        _after(name, module)
    return True


def installed() -> bool:
    return bool(_state["installed"])
