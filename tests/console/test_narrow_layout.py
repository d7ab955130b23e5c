"""Readability at 80x24: what the operator sees in a small terminal is complete."""

from __future__ import annotations

from console.widgets.live_panel import batch_chart


def test_short_chart_still_labels_n():
    # 3 chart rows (the 80x24 layout): N=5 falls on the top row; its label must show.
    rows = [r.plain for r in batch_chart([1, 2, 3], 5, 20, 3)]
    assert any(r.startswith("N=5") for r in rows), rows
    assert sum("\u254c" in r for r in rows) == 1


async def test_prompt_title_and_error_wrap_instead_of_being_cut(make_app):
    from textual.widgets import Input

    from console.dialogs.prompt import PromptScreen
    from server_control.protocol.decision import validate_threshold
    from tests.console.screen_text import screen_text

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("equals_sign")
        assert isinstance(app.screen, PromptScreen)
        app.screen.query_one(Input).value = "99999999999"
        await pilot.press("enter")
        await pilot.pause()
        try:
            validate_threshold("99999999999")
        except ValueError as exc:
            message = str(exc)
        text = screen_text(app)
        for word in [*message.split(), "never", "disable)"]:
            assert word in text, (word, text)


def test_help_descriptions_fit_one_line_at_80_columns():
    import io

    from rich.console import Console

    from console.fleet.help import fleet_help_table
    from console.keys import SERVER_OWNERS, actions_of
    from console.screens.help import help_table

    # The help box at 80 columns: 90% of the width less border and padding.
    for table, owners in ((help_table(), SERVER_OWNERS), (fleet_help_table(), frozenset({"fleet"}))):
        console = Console(width=66, record=True, file=io.StringIO())
        console.print(table)
        lines = console.export_text().splitlines()
        short = [a.help for a in actions_of(owners) if len(a.help) <= 40]
        assert short
        for text in short:
            assert any(text in line for line in lines), text


async def test_timeline_rows_readable_at_80x24_and_200x60(make_app):
    from tests.console.screen_text import screen_text

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("p")  # the secondary panels, collapsed at 80x24
        await pilot.pause()
        text = screen_text(app)
        # newest switch first: full time, mode, batch, threshold (fake: 10:02:15 target 7 5)
        assert "10:02:15    target   7  5" in text, text
        assert "spec 60% 301 tok/s" in text and "target 40% 702 tok/s" in text, text
    app = make_app()
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause()
        text = screen_text(app)
        assert "speculative 60% time, 301 tok/s  target-only 40% time, 702 tok/s" in text, text
        assert "10:02:15" in text and "TP0" in text


def test_no_dead_top_level_names_in_the_console():
    """Every public top-level function and class of console/ is used somewhere else."""
    import ast
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted((root / "console").rglob("*.py"))
    corpus = {f: f.read_text() for f in [*files, *sorted((root / "tests" / "console").rglob("*.py"))]}
    dead = []
    for f in files:
        for node in ast.parse(corpus[f]).body:
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            name = node.name
            if name.startswith("_") or name in ("main", "register"):
                continue
            word = re.compile(rf"\b{name}\b")
            uses = sum(len(word.findall(text)) for text in corpus.values())
            if uses <= 1:  # only its own definition
                dead.append(f"{f.relative_to(root)}: {name}")
    assert not dead, dead
