"""Modules a ``-m`` expression deselects whole are not imported at all.

A module marked as a whole (``pytestmark = pytest.mark.sglang``, or a list of marks) whose
every test the ``-m`` expression would deselect need not be imported to be deselected. The
SGLang tier's modules import sglang and torch at the top (~20 s of CPU a process), so
without this every worker of the fast loop (``-m "not sglang and not sglang_server"``)
paid for both while collecting tests it then deselected.

Exact, not a guess: a module is skipped only when the expression is false for its
module-wide marks together with every combination of the other names the expression
uses (a test may add marks of its own). Anything this cannot read (a mark built another
way, a keyword-argument match, an expression pytest would refuse) is collected as before.
"""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

# pytest's identifier in -m expressions (_pytest/mark/expression.py)
_IDENT = re.compile(r"(?:\w|:|\+|-|\.|\[|\]|\\|/)+")
_KEYWORDS = {"and", "or", "not"}
_MAX_NAMES = 12  # 4,096 evaluations at most


def module_marks(path: Path) -> frozenset[str]:
    """The names in a module-level ``pytestmark = pytest.mark.X`` or ``[pytest.mark.X, ...]``
    (marks with arguments count by name; anything else in the list is ignored)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    except (OSError, SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets)):
            continue
        values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
        for value in values:
            if isinstance(value, ast.Call):
                value = value.func
            if (
                isinstance(value, ast.Attribute)
                and isinstance(value.value, ast.Attribute)
                and value.value.attr == "mark"
                and isinstance(value.value.value, ast.Name)
                and value.value.value.id == "pytest"
            ):
                names.add(value.attr)
    return frozenset(names)


def deselects_whole(markexpr: str, marks: frozenset[str]) -> bool:
    """Whether ``-m markexpr`` deselects every test that carries ``marks`` (and any others)."""
    if not markexpr.strip() or not marks or "(" in markexpr:  # no keyword-argument matches
        return False
    try:
        from _pytest.mark.expression import Expression  # pytest's own evaluator

        expr = Expression.compile(markexpr)
    except Exception:  # noqa: BLE001 - a private API moved, or pytest will refuse the expression itself
        return False
    free = sorted({n for n in _IDENT.findall(markexpr) if n not in _KEYWORDS} - marks)
    if len(free) > _MAX_NAMES:
        return False
    for values in itertools.product((False, True), repeat=len(free)):
        on = marks | {n for n, v in zip(free, values, strict=True) if v}
        if expr.evaluate(lambda name, on=on, **_: name in on):
            return False
    return True
