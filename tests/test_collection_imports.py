"""The fast loop's test modules import no heavy library when pytest collects them.

Every xdist worker imports every test module it collects, and the fast loop (``-m "not sglang
and not sglang_server"``, tests/support/collect_skip.py) collects everything but the SGLang
tier's modules. A module that imports torch (~2 CPU-s), transformers or sglang at its top,
itself or through a module of this repository it imports at its top, makes each worker pay
for tests that one worker runs: such a module reads them with ``tests/support/lazy.py`` or
inside the test or fixture that needs them. This walks the imports statically (``ast``):
module level only, ``if TYPE_CHECKING:`` blocks left out, ``pytest.importorskip`` counted."""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

import pytest

from tests.support import collect_skip
from tests.support.lazy import lazy

REPO = Path(__file__).resolve().parents[1]
FAST_LOOP = "not sglang and not sglang_server"
HEAVY = {"torch", "transformers", "safetensors", "sglang", "triton"}
LOCAL = {"tests", "gpu_bundle", "server_control", "console", "benchmarks"}


@functools.cache
def _module_file(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level(body: list[ast.stmt]):
    """The statements Python runs when it imports the module (not TYPE_CHECKING's)."""
    for node in body:
        if isinstance(node, ast.If):
            test = node.test
            if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
            ):
                yield from _top_level(node.orelse)
                continue
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, *(h.body for h in node.handlers), node.orelse, node.finalbody):
                yield from _top_level(block)
        else:
            yield node


def _run_at_import(node: ast.AST):
    """``node`` and what under it runs when it runs: of a function it defines, only the
    decorators and default values, not the body."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for part in (*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            yield from _run_at_import(part)
        return
    if isinstance(node, ast.Lambda):
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _run_at_import(child)


@functools.cache
def imports_at_import(root: Path, path: Path) -> frozenset[str]:
    """The absolute module names ``path`` imports when it is imported (its own statements)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    skips = "importorskip" in source
    here = _module_name(root, path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    names: set[str] = set()
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)  # a submodule, if it is one
        for call in _run_at_import(node) if skips else ():
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "importorskip"
                and call.args
                and isinstance(call.args[0], ast.Constant)
            ):
                names.add(str(call.args[0].value))
    return frozenset(names)


def heavy_imports(path: Path, root: Path = REPO) -> dict[str, list[str]]:
    """Each heavy library ``path`` loads when imported, with the chain of modules to it."""
    found: dict[str, list[str]] = {}
    seen: set[Path] = set()
    todo: list[tuple[Path, list[str]]] = [(path, [_module_name(root, path)])]
    while todo:
        current, chain = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for name in sorted(imports_at_import(root, current)):
            top = name.split(".")[0]
            if top in HEAVY:
                found.setdefault(top, chain + [name])
            elif top in LOCAL:
                parts = name.split(".")
                for i in range(1, len(parts) + 1):  # each package on the way runs its __init__
                    target = _module_file(root, ".".join(parts[:i]))
                    if target is not None and target not in seen:
                        todo.append((target, chain + [".".join(parts[:i])]))
    return found


def fast_loop_modules() -> list[Path]:
    out = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name == "conftest.py" or (
            path.name.startswith("test_") and not collect_skip.deselects_whole(FAST_LOOP, collect_skip.module_marks(path))
        ):
            out.append(path)
    return out


def test_no_fast_loop_module_imports_a_heavy_library_when_collected():
    offenders = {str(p.relative_to(REPO)): chains for p in fast_loop_modules() if (chains := heavy_imports(p))}
    assert not offenders, "\n".join(f"{m}: {' -> '.join(c)}" for m, cs in offenders.items() for c in cs.values())


def test_the_walk_finds_a_heavy_import_through_a_local_module(tmp_path):
    """The rule's own control: a module importing torch through a module of this repository
    (the way ``tests/gpu_bundle/test_ops.py`` once did through ``gpu_bundle.ops``) is found,
    and one that reads it lazily or inside a test is not."""
    (tmp_path / "gpu_bundle").mkdir()
    (tmp_path / "gpu_bundle" / "__init__.py").write_text("")
    (tmp_path / "gpu_bundle" / "ops.py").write_text("import torch\n")
    (tmp_path / "tests").mkdir()
    eager = tmp_path / "tests" / "test_eager.py"
    eager.write_text("import pytest\nfrom gpu_bundle import ops\n")
    assert heavy_imports(eager, tmp_path) == {"torch": ["tests.test_eager", "gpu_bundle.ops", "torch"]}
    skip = tmp_path / "tests" / "test_skip.py"
    skip.write_text("import pytest\ntry:\n    pass\nfinally:\n    pytest.importorskip('transformers')\n")
    assert set(heavy_imports(skip, tmp_path)) == {"transformers"}
    late = tmp_path / "tests" / "test_late.py"
    late.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n"
        "from tests.support.lazy import lazy\nops = lazy('gpu_bundle.ops')\n"
        "def test_x():\n    import torch\n"
    )
    assert heavy_imports(late, tmp_path) == {}


@pytest.mark.parametrize("module", ["tests/gpu_bundle/test_ops.py", "tests/real_sglang/test_crossover_models.py"])
def test_the_modules_that_need_torch_are_in_the_fast_loop(module):
    """The rule covers the modules it was written for (they are not deselected whole)."""
    assert REPO / module in fast_loop_modules()


def test_a_lazy_module_is_imported_by_a_read_and_not_by_collections_probes(tmp_path, monkeypatch):
    """pytest's collection reads ``__test__`` and the like from every module global: a lazy
    stand-in answers those itself (it once imported torch in every worker that way)."""
    (tmp_path / "lazy_probe_module.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_probe_module", raising=False)
    probe = lazy("lazy_probe_module")
    assert not hasattr(probe, "__test__") and not hasattr(probe, "__wrapped__")
    assert "lazy_probe_module" not in sys.modules
    assert probe.VALUE == 42 and "lazy_probe_module" in sys.modules
    assert lazy("lazy_probe_module", "VALUE").real == 42  # a name inside the module
