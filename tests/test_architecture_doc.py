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


DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
NAMED = re.compile(r"`([\w./-]+\.(?:py|toml|json|md))(?:[:`]|::)")
# names the docs give to files that are not in a tree: the rig cache's facts, a model
# directory's config, an operator's example fleet file, the GPU bundle's manifest
ELSEWHERE = {"facts.json", "config.json", "f.toml", "manifest.json", "parse-verdicts.json"}  # files outside the tree
SKIPPED_DIRS = {".git", ".venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}


def _files(base: Path) -> set[str]:
    out = set()
    for path in base.rglob("*"):
        parts = path.relative_to(base).parts
        if path.is_file() and not SKIPPED_DIRS & set(parts) and not any(p.startswith(".") for p in parts[:-1]):
            out.add(str(path.relative_to(base)))
    return out


def _sglang_files() -> set[str]:
    """SGLang's own files (the docs cite its code by path), without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return set()
    return _files(Path(next(iter(spec.submodule_search_locations))))


def stale_names(docs: list[Path], ours: set[str], sglang: set[str]) -> list[str]:
    """Every backticked file name in the docs names a file: ours (a path, or a name unique
    enough to end one) or SGLang's (its package's files, when it is installed)."""
    stale = []
    for doc in docs:
        for i, line in enumerate(doc.read_text().splitlines(), 1):
            for name in NAMED.findall(line):
                if name in ELSEWHERE:
                    continue
                if any(f == name or f.endswith("/" + name) for f in ours):
                    continue
                if any(f == name or f.endswith("/" + name) for f in sglang) or (not sglang and "/" in name):
                    continue
                stale.append(f"{doc.name}:{i}: {name}")
    return stale


def test_every_file_the_docs_name_exists(tmp_path) -> None:
    ours, sglang = _files(ROOT), _sglang_files()
    assert stale_names(DOCS, ours, sglang) == []
    # the control: a renamed module is caught
    doc = tmp_path / "d.md"
    doc.write_text("Validated by `server_control/config/profile.py` (+ `profile_schema.py`).\n")
    assert stale_names([doc], ours, sglang) == ["d.md:1: profile_schema.py"]


# a dotted name of ours in the docs: backticked, or after `python -m`
FILE_NAME = re.compile(r"\.(?:md|py|toml|json|tcss)$")  # `console.md` is a file, checked above
DOTTED = re.compile(r"(?:`|python -m )((?:server_control|console|benchmarks)(?:\.[A-Za-z_]\w*)+)")


def _resolves(name: str, root: Path) -> bool:
    """``name`` is a module or package of the tree (a C extension counts where its source
    is named in pyproject.toml), or an attribute a module defines at its top level."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if not (base / "__init__.py").exists() else base / "__init__.py"
        if not module.exists():
            if cut == len(parts) and name in (root / "pyproject.toml").read_text():
                return True  # an extension module built at install
            continue
        rest = parts[cut:]
        if not rest:
            return True
        source = module.read_text()
        return re.search(rf"^(?:def |class |async def )?{re.escape(rest[0])}\b", source, re.M) is not None or (
            f"import {rest[0]}" in source or f" {rest[0]}," in source
        )
    return False


def stale_modules(docs: list[Path], root: Path) -> list[str]:
    return [
        f"{doc.name}:{i}: {name}"
        for doc in docs
        for i, line in enumerate(doc.read_text().splitlines(), 1)
        for name in DOTTED.findall(line)
        if not FILE_NAME.search(name) and not _resolves(name, root)
    ]


def test_every_module_the_docs_name_exists(tmp_path) -> None:
    assert stale_modules(DOCS, ROOT) == []
    doc = tmp_path / "d.md"
    doc.write_text("`python -m benchmarks.logs_bench`, `server_control.loadgen`, `server_control.logs.NO_SUCH`\n")
    assert stale_modules([doc], ROOT) == ["d.md:1: server_control.loadgen", "d.md:1: server_control.logs.NO_SUCH"]
