"""Import hook: apply each part of the patch when SGLang imports the module it patches.

``install()`` puts a meta path finder first on ``sys.meta_path``. When one of the SGLang
modules of ``TARGETS`` is imported, the finder wraps its loader so that the target's
``before()`` runs before the module's own code and ``after(module)`` after it.
``TARGETS`` maps each SGLang module name to its module in ``targets/`` (named like it;
what each one patches is in its docstring), imported only when SGLang imports the module.

Fail mode (the gate says no): when the anchors of the report-only parts are there
(``gate.report_parts_missing()`` is None) the fields are still added and the
internal-state controller reports ``active: false`` with the reason: the flags parse and
the server starts with the switch off (``report``). Otherwise (``off``), in the process
that ``serve`` started, the four flags are taken off ``sys.argv`` before SGLang parses it
(one line names them), so the server still starts. Either way one ``NOT active`` line
gives the reason. Each target asks ``mode()`` itself (the logging one never does, so it
never runs the gate), and acts only in the modes it says.

A target already imported when ``install()`` runs is patched at once (``server_args``
cannot be: its struct is built; that is reported as NOT active).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TypedDict

from server_control.sglang_patch import gate

TARGETS: dict[str, str] = {
    "sglang.srt.server_args": "server_args",
    "sglang.srt.utils.common": "common",
    "sglang.srt.speculative.eagle_worker_v2": "eagle_worker_v2",
    "sglang.srt.managers.scheduler_components.internal_state": "internal_state",
    "sglang.srt.managers.scheduler_components.batch_result_processor": "batch_result_processor",
    "sglang.srt.observability.metrics_collector": "metrics_collector",
    "sglang.srt.mem_cache.kv_cache_configurator": "kv_cache_configurator",
    "sglang.srt.managers.scheduler_components.request_receiver": "request_receiver",
}
SERVER_ARGS = "sglang.srt.server_args"

FULL, REPORT, OFF = "full", "report", "off"


class _HookState(TypedDict):
    installed: bool
    gate: str | None  # the gate's reason (None: passed)
    mode: str | None  # FULL, REPORT or OFF once the gate ran
    applied: set[str]  # the target modules patched
    serve_main: bool


_lock = threading.RLock()
_state: _HookState = {"installed": False, "gate": None, "mode": None, "applied": set(), "serve_main": False}


def gate_reason() -> str | None:
    """The gate's verdict for this process (computed once)."""
    return _gate()[0]


def mode() -> str:
    """``full`` (the switch), ``report`` (flags + the reason in /server_info) or ``off``."""
    return _gate()[1]


def _gate() -> tuple[str | None, str]:
    with _lock:
        current = _state["mode"]
        if current is None:
            reason = gate.check()
            _state["gate"] = reason
            if reason is None:
                _state["mode"] = current = FULL
            else:
                gate.not_active(reason)
                _state["mode"] = current = REPORT if gate.report_parts_missing() is None else OFF
        return _state["gate"], current


def serve_main() -> bool:
    """Whether this is the launch_server process ``serve`` started."""
    return bool(_state["serve_main"])


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


def target(name: str) -> ModuleType:
    """The module of ``targets/`` that patches SGLang's module ``name``."""
    return importlib.import_module(f"{__package__}.targets.{TARGETS[name]}")


def _before(name: str) -> None:
    first = getattr(target(name), "before", None)
    if first is not None:
        first()


def _after(name: str, module: ModuleType) -> None:
    try:
        target(name).after(module)
    except Exception as exc:  # noqa: BLE001 - never break SGLang's import
        gate.not_active(f"patching {name} failed: {exc!r}")
    _state["applied"].add(name)


class _HookedLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader = loader
        self._name = name

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        _before(self._name)
        self._loader.exec_module(module)
        _after(self._name, module)

    def __getattr__(self, item: str) -> object:  # get_source, get_code, is_package, ... for inspect
        return getattr(self._loader, item)


class PatchFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy: set[str] = set()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname not in TARGETS or fullname in self._busy:
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
    for name in TARGETS:
        module = sys.modules.get(name)
        if module is None:
            continue
        _after(name, module)
    return True


def installed() -> bool:
    return bool(_state["installed"])
