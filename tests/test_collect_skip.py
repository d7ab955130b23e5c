"""tests/support/collect_skip.py: a module the -m expression deselects whole is skipped
unimported, and only then."""

from pathlib import Path

from tests.support.collect_skip import deselects_whole, module_marks

REPO = Path(__file__).resolve().parent.parent
FAST = "not sglang and not sglang_server"


def test_module_wide_marks_are_read_without_importing(tmp_path):
    forms = {
        "pytestmark = pytest.mark.sglang\n": {"sglang"},
        "pytestmark = [pytest.mark.sglang_server, SKIP, pytest.mark.timeout(900)]\n": {"sglang_server", "timeout"},
        "import torch\npytestmark = (pytest.mark.tmux,)\n": {"tmux"},  # read, never run
        "def test_x():\n    pytestmark = pytest.mark.sglang\n": set(),  # not module level
        "pytestmark = marks()\n": set(),
        "this is not python(\n": set(),
    }
    for i, (text, want) in enumerate(forms.items()):
        path = tmp_path / f"test_{i}.py"
        path.write_text(text)
        assert module_marks(path) == want, text
    assert module_marks(tmp_path / "missing.py") == frozenset()
    assert module_marks(REPO / "tests/sglang/test_adaptive.py") == {"sglang"}


def test_skipped_only_where_every_test_would_be_deselected():
    assert deselects_whole(FAST, frozenset({"sglang"}))
    assert deselects_whole(FAST, frozenset({"sglang_server", "timeout"}))
    assert not deselects_whole(FAST, frozenset({"tmux"}))
    assert not deselects_whole("", frozenset({"sglang"}))
    assert not deselects_whole(FAST, frozenset())
    # a test may add marks of its own: "or tmux" keeps a module whose tests may carry tmux
    assert not deselects_whole("not sglang or tmux", frozenset({"sglang"}))
    assert deselects_whole("tmux and not sglang", frozenset({"sglang"}))
    assert not deselects_whole("sglang", frozenset({"sglang"}))
    assert not deselects_whole("not sglang(x=1)", frozenset({"sglang"}))  # keyword matches: not read
    assert not deselects_whole("not (", frozenset({"sglang"}))  # pytest itself says what is wrong
