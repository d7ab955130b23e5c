"""docs/architecture.md's module table names every module of server_control/, each in the
row of its package, and nothing that is not there; its layer picture names every package."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `(server_control/[\w/]*)` (?P<modules>[^|]*)\|", re.M)


def _table() -> dict[str, set[str]]:
    text = DOC.read_text()
    section = text[text.index("## Modules") :]
    section = section[: section.index("\n## ", 1)]
    return {m.group(1).rstrip("/"): set(re.findall(r"`([\w]+\.py)`", m.group("modules"))) for m in ROW.finditer(section)}


def _tree() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for init in (ROOT / "server_control").rglob("__init__.py"):
        pkg = init.parent
        if "bootstrap" in pkg.parts:
            continue
        out[str(pkg.relative_to(ROOT))] = {p.name for p in pkg.glob("*.py") if p.name != "__init__.py"}
    return out


def test_module_table_equals_the_tree() -> None:
    table, tree = _table(), _tree()
    assert sorted(table) == sorted(tree), "a package without a row, or a row without a package"
    for pkg, modules in tree.items():
        assert table[pkg] == modules, f"{pkg}: missing {sorted(modules - table[pkg])}, gone {sorted(table[pkg] - modules)}"


def test_layer_picture_names_every_package() -> None:
    text = DOC.read_text()
    picture = text[text.index("## Layers") : text.index("### Walkthrough")]
    packages = {p.split("/")[1] for p in _tree() if p.count("/") == 1}
    missing = {p for p in packages if not re.search(rf"\b{p}/", picture)}
    assert not missing
