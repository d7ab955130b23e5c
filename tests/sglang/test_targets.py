"""hook.TARGETS is the one table from SGLang module to target module: every entry has its
module in sglang_patch/targets/ (with ``after``), every target module has its entry, every
target is an anchored SGLang module, and a target that raises never breaks SGLang's import."""

from __future__ import annotations

import importlib
import types
from pathlib import Path

from server_control.sglang_patch import gate, hook

TARGETS_DIR = Path(hook.__file__).parent / "targets"


def test_the_table_and_the_targets_directory_are_the_same() -> None:
    on_disk = {p.stem for p in TARGETS_DIR.glob("*.py") if p.name != "__init__.py"}
    assert set(hook.TARGETS.values()) == on_disk
    for sglang_name, stem in hook.TARGETS.items():
        module = hook.target(sglang_name)
        assert module.__name__ == f"server_control.sglang_patch.targets.{stem}"
        assert callable(module.after), stem
        assert sglang_name.rsplit(".", 1)[1] == stem, "a target is named like its SGLang module"


def test_every_target_is_an_sglang_module_the_gate_anchors() -> None:
    anchored = set(gate.ANCHORS)
    assert set(hook.TARGETS) <= anchored, set(hook.TARGETS) - anchored


def test_a_target_that_raises_leaves_the_import_alone(monkeypatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(gate, "not_active", lines.append)
    target = hook.target("sglang.srt.observability.metrics_collector")

    def boom(module: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(target, "after", boom)
    hook._after("sglang.srt.observability.metrics_collector", types.ModuleType("x"))
    assert lines == ["patching sglang.srt.observability.metrics_collector failed: RuntimeError('boom')"]
    importlib.import_module("server_control.sglang_patch.targets")  # the package itself imports cleanly
