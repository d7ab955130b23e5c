"""Every broad ``except`` our code lets through ruff (``# noqa: BLE001``) says why on its
line: a reason after the code (``# noqa: BLE001 - what the caller gets instead``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOQA = re.compile(r"#\s*noqa:\s*BLE001(?P<rest>.*)$")
REASON = re.compile(r"^\s*[-:(]\s*\S.{8,}")  # " - " then at least a few words


def bare_noqas(base: Path, roots: list[Path]) -> list[str]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts or path == Path(__file__).resolve():
                continue
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                m = NOQA.search(line)
                if m and not REASON.match(m.group("rest")):
                    found.append(f"{path.relative_to(base)}:{i}")
    return found


def test_every_broad_except_says_why():
    roots = [ROOT / name for name in ("console", "server_control", "gpu_bundle", "benchmarks", "tests")]
    assert bare_noqas(ROOT, roots) == []


def test_a_bare_one_is_found_and_a_reasoned_one_is_not(tmp_path):
    (tmp_path / "m.py").write_text(
        "try:\n    pass\nexcept Exception:  # noqa: BLE001\n    pass\n"
        "try:\n    pass\nexcept Exception:  # noqa: BLE001 - a reason given here\n    pass\n"
    )
    assert bare_noqas(tmp_path, [tmp_path]) == ["m.py:3"]
