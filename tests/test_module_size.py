"""Modules stay small: every .py file under console/, server_control/ and benchmarks/ has
fewer than 400 lines (as `ruff format` writes them). A module that grows past it is split
by responsibility, not squeezed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("console", "server_control", "benchmarks")
LIMIT = 400


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def test_every_module_is_under_the_line_limit() -> None:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    assert len(files) > 50, "the walk found (almost) no modules: wrong root?"
    too_long = {str(p.relative_to(ROOT)): n for p in files if (n := _lines(p)) >= LIMIT}
    assert not too_long, f"modules with {LIMIT} lines or more (split them by responsibility): " + ", ".join(
        f"{name} ({n})" for name, n in sorted(too_long.items())
    )
