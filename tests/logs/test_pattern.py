"""The operator's regex rule (server_control/logs/pattern.py): smart case, the same for
`specconsole logs --grep`, the store and the console's `/` filter."""

import pytest

from console.widgets.log.format import LineFilter
from server_control.logs import LogStore, compile_pattern, parse_text
from server_control.logs.pattern import is_case_sensitive
from server_control.logs.store import record_matcher

LOG = """[2026-11-29 10:00:00 TP0] Dynamic speculation: switched to target-only (decode batch 7 > threshold 5)
[2026-11-29 10:00:01 TP0] dynamic speculation: lower-case wording
[2026-11-29 10:00:02] The server is Fired Up and ready to roll!
[2026-11-29 10:00:03 TP0] WARNING: NOT active 12 steps
"""
PATTERNS = ["dynamic", "Dynamic", "fired up", "Fired", "WARNING", r"\S+ up", r"\d+ steps", "not active", "!dynamic"]


def test_smart_case_ignores_escape_letters():
    assert not is_case_sensitive("fired up") and not is_case_sensitive(r"\S+\W\d") and not is_case_sensitive("12")
    assert is_case_sensitive("Fired") and is_case_sensitive(r"\Sx Y")
    assert compile_pattern("fired up").search("Fired Up")
    assert compile_pattern("Fired").search("fired") is None
    with pytest.raises(ValueError, match=r"invalid regular expression '\('"):
        compile_pattern("(")


@pytest.mark.parametrize("text", PATTERNS)
def test_cli_grep_store_and_screen_filter_match_the_same_records(text):
    store = LogStore()
    store.extend(parse_text(LOG))
    records = store.records()
    invert = text.startswith("!")
    body = text.lstrip("!")
    grep = [r.seq for r in records if record_matcher(body, invert)(r)]
    screen = [r.seq for r in records if LineFilter.parse(text).accepts(r)]
    stored = [r.seq for r in store.filter(body, invert=invert)]
    assert grep == screen == stored
    assert grep  # every pattern here matches something: the comparison is not vacuous
