"""A run's state is written once, in ``server_control.model.vocabulary``: no comparison with a
bare run-state string and no hand-written group of them anywhere else in the product code.
Other vocabularies that happen to share a word (a log record's kind, the simulator's rank
hand-shake, a gateway worker's status) are named below with where they live."""

from __future__ import annotations

import ast
from pathlib import Path

from server_control.model.vocabulary import EXTERNAL_STATE, ChangeState, OtherState, Outcome, RunState, Verdict

ROOT = Path(__file__).resolve().parents[1]
WORDS = {s.value for s in RunState} | {EXTERNAL_STATE}
VOCABULARY = ROOT / "server_control" / "model" / "vocabulary.py"


def _is_word(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in WORDS


def run_state_words(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each comparison with a run-state string, and each tuple, list or set
    of two or more strings that are all run-state words."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                items = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                found += [(node.lineno, f"compared with {item.value!r}") for item in items if _is_word(item)]  # type: ignore[attr-defined]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2 and all(map(_is_word, node.elts)):
            found.append((node.lineno, "a group of run-state strings"))
    return found


def test_no_run_state_string_outside_the_vocabulary() -> None:
    hits = []
    for pkg in ("server_control", "console"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == VOCABULARY:
                continue
            for line, what in run_state_words(ast.parse(path.read_text(), str(path))):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert hits == [], "use RunState / the groups in server_control.model.vocabulary:\n" + "\n".join(hits)


def test_the_scan_finds_what_it_must() -> None:
    # The negative control, kept: each shape the rule forbids is found.
    src = 'GONE = ("stopped", "fatal")\nif s == "ready": pass\nif s in ("unhealthy", 1): pass\n'
    assert [line for line, _ in run_state_words(ast.parse(src))] == [1, 2, 3]
    assert run_state_words(ast.parse('if s == RunState.READY: pass\nx = ("ready", 3)\n')) == []


# A setting change's state, an operation's outcome and a verification's verdict are typed
# (``SettingChange.state: ChangeState``, ``OperationResult.outcome: Outcome``,
# ``VerifyLayer.status`` / ``Verification.summary: Verdict``); their words are shared with other
# vocabularies (a log record's kind "error", a journal entry's result "applied"), so the
# rule there is narrower: a ``.state`` / ``.outcome`` / ``.status`` / ``.summary`` (or a variable of that name) is never
# compared with one of their strings.
TYPED_WORDS = {
    "state": {s.value for s in ChangeState} | {s.value for s in OtherState},
    "outcome": {s.value for s in Outcome},
    "status": {s.value for s in Verdict},
    "summary": {s.value for s in Verdict},
}


def typed_word_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for each comparison of a ``state``/``outcome`` attribute or name with one
    of its vocabulary's strings."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        names = {s.attr for s in sides if isinstance(s, ast.Attribute)} | {s.id for s in sides if isinstance(s, ast.Name)}
        strings = [
            item.value
            for side in sides
            for item in (side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side])
            if isinstance(item, ast.Constant) and isinstance(item.value, str)
        ]
        for name, words in TYPED_WORDS.items():
            found += [(node.lineno, f"{name} compared with {w!r}") for w in strings if name in names and w in words]
    return found


def test_no_change_state_or_outcome_string_compared_outside_the_vocabulary() -> None:
    hits = []
    for pkg in ("server_control", "console"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            if path == VOCABULARY:
                continue
            for line, what in typed_word_comparisons(ast.parse(path.read_text(), str(path))):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert hits == [], "use ChangeState / Outcome / OtherState from server_control.model.vocabulary:\n" + "\n".join(hits)


def test_the_typed_scan_finds_what_it_must() -> None:
    src = 'if c.state == "pending": pass\nif outcome in ("done", 1): pass\nif state != "unknown": pass\nif r.summary == "fail": pass\n'
    assert [line for line, _ in typed_word_comparisons(ast.parse(src))] == [1, 2, 3, 4]
    clean = 'if c.state == ChangeState.PENDING: pass\nif rec.kind == "error": pass\nif x == "applied": pass\n'
    assert typed_word_comparisons(ast.parse(clean)) == []
