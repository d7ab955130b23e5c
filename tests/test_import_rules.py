"""The dependency rules that static contracts cannot see, and the contracts' own coverage.

`lint-imports` (scripts/test; contracts in pyproject.toml) checks every import statement,
also inside functions. What it cannot see is a module loaded at run time through a string
(``importlib.import_module``, the CLI's command list): so a fresh interpreter imports the
session layer and every headless command module and must not have loaded Textual, nor
Rich, click or pygments, which httpx's own command-line client would bring
(server_control/net/lean_httpx.py keeps it out), nor torch, transformers or sglang (seconds
a process: the patch and the rig import them where they run, never at the top).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADLESS = """
import importlib, json, sys
import server_control.session.api, server_control.session.session, server_control.fleet.fleet
from console.cli.main import COMMAND_MODULES, build_parser
for name in COMMAND_MODULES:
    importlib.import_module(name)
build_parser()
heavy = ("textual", "rich", "click", "pygments", "httpx._main", "torch", "transformers", "safetensors", "sglang", "triton")
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy)))
"""
LEAN = """
import json, sys
import server_control.net.lean_httpx as lean
import httpx
loaded = [m for m in ("httpx._main", "rich", "click") if m in sys.modules]
client = httpx.Client(trust_env=False)
client.close()
try:
    httpx.main()
    said = None
except SystemExit as exc:
    said = str(exc)
import httpx._main as real
print(json.dumps({"loaded": loaded, "said": said, "real": hasattr(real, "main") and real.main is not httpx.main}))
"""


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _subpackages() -> set[str]:
    pkg = ROOT / "server_control"
    return {f"server_control.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").exists()}


def test_session_and_headless_cli_load_no_textual() -> None:
    out = subprocess.run([sys.executable, "-c", HEADLESS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_lean_httpx_works_without_its_command_line_client_and_leaves_the_real_one_importable() -> None:
    out = subprocess.run([sys.executable, "-c", LEAN], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == [], got
    assert got["said"] and "lean_httpx.py" in got["said"], got
    assert got["real"] is True, got  # a later explicit import loads httpx's own module


def test_every_package_is_in_a_layer_or_held_to_protocol() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    assert isinstance(layers, list)
    layered = {m.strip() for layer in layers for m in str(layer).split("|")}
    held = {"server_control.sim", "server_control.sglang_patch"}
    assert _subpackages() - held == {m for m in layered if m in _subpackages()}


def test_sim_and_patch_are_forbidden_everything_but_protocol() -> None:
    contract = next(c for c in _contracts() if c.get("source_modules") == ["server_control.sim", "server_control.sglang_patch"])
    forbidden = {str(m) for m in contract["forbidden_modules"]}  # type: ignore[attr-defined]
    loose = {f"server_control.{p.stem}" for p in (ROOT / "server_control").glob("*.py") if p.stem != "__init__"}
    everything = (_subpackages() | loose) - {"server_control.protocol", "server_control.sim", "server_control.sglang_patch"}
    assert everything <= forbidden
    assert "console" in forbidden


def test_one_import_path_per_name_no_reexport_lines() -> None:
    """No ``from a import X as X`` (mypy's explicit re-export): every name is imported from
    the module that defines it."""
    pattern = re.compile(r"^\s*from [\w.]+ import .*\b(\w+) as \1\b", re.M)
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
        for top in ("server_control", "console", "tests", "benchmarks")
        for p in sorted((ROOT / top).rglob("*.py"))
        for m in pattern.finditer(p.read_text())
    ]
    assert found == []


def test_a_packages_api_names_come_from_the_package() -> None:
    """A package that names its API in ``__all__`` (server_control/logs/) is imported by that
    API from outside it: ``LogStore`` came by two paths (7 from ``logs.store``, 12 from
    ``logs``), ``Record`` by two. Inside the package, its modules import each other."""
    import server_control.logs as logs_pkg

    api = set(logs_pkg.__all__)
    pattern = re.compile(r"^\s*from server_control\.logs\.\w+ import ([^\n(]+)$", re.M)
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
        for top in ("server_control", "console", "tests", "benchmarks")
        for p in sorted((ROOT / top).rglob("*.py"))
        if not str(p.relative_to(ROOT)).startswith("server_control/logs/")
        for m in pattern.finditer(p.read_text())
        if {n.strip().split(" as ")[0] for n in m.group(1).split(",")} & api
    ]
    assert found == []


def test_no_test_module_imports_another_test_modules_helpers() -> None:
    """Shared test helpers live in tests/support/ (fixtures in conftest.py files)."""
    pattern = re.compile(r"^\s*(?:from (?:tests\.[\w.]*\.|\.+)test_\w+ import|import tests\.[\w.]*\btest_\w+)", re.M)
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0).strip()}"
        for p in sorted((ROOT / "tests").rglob("*.py"))
        for m in pattern.finditer(p.read_text())
    ]
    assert found == []


def test_every_console_module_is_in_a_console_layer() -> None:
    """A module or package added to console/ must take a floor in the console's contract."""
    layers = next(c for c in _contracts() if c["type"] == "layers" and str(c["layers"][0]).startswith("console"))["layers"]  # type: ignore[index]
    assert isinstance(layers, list)
    layered = {m.strip() for layer in layers for m in str(layer).split("|")}
    pkg = ROOT / "console"
    present = {f"console.{p.name}" for p in pkg.iterdir() if (p / "__init__.py").exists()}
    present |= {f"console.{p.stem}" for p in pkg.glob("*.py") if p.stem not in ("__init__", "__main__")}
    assert present == layered, f"missing: {sorted(present - layered)}, gone: {sorted(layered - present)}"
