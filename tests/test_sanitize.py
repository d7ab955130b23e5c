"""server_control.sanitize: the one place escape sequences and control characters go."""

import json

from server_control.sanitize import clean_bytes, clean_json, loads_clean, strip_controls


def test_clean_text_keeps_tabs_and_newlines():
    assert clean_bytes(b"a\tb\nc\x1b[1;31md\x9b") == "a\tb\ncd\ufffd"
    assert clean_bytes("\u009b31mx".encode()) == "x"


def test_strip_controls_removes_csi_osc_c0_and_c1_from_text():
    assert strip_controls("plain line") == "plain line"
    assert strip_controls("\x1b[31mred\x1b[0m \x1b]0;title\x07words\x07\x00") == "red words"
    assert strip_controls("a\u009b2Jb\u0085c\r\nd\te") == "abc\nd\te"
    assert strip_controls(b"\x1b[32mgreen".decode()) == clean_bytes(b"\x1b[32mgreen")


def test_an_unterminated_osc_ends_at_the_line_end():
    """Found by tests/logs/test_fuzz.py: an OSC without its terminator swallowed the
    newlines after it, so the whole file and the same bytes in chunks gave other lines."""
    assert clean_bytes(b"\x1b]\n\n") == "\n\n"
    assert clean_bytes(b"a\x1b]0;title\nb\n") == "a\nb\n"


def test_every_string_sequence_and_its_c1_form_goes_with_its_payload():
    cases = {
        "\x1bP1$qm\x1b\\x": "x",
        "\x1bX sos \x1b\\x": "x",
        "\x1b^ pm \x07x": "x",
        "\x1b_ apc \x1b\\x": "x",
        "\u0090dcs\u009cx": "x",
        "\u009d0;title\u009cx": "x",
        "\u009d52;c;aGk=\x07x": "x",
        "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\": "link",
    }
    for text, shown in cases.items():
        assert strip_controls(text) == shown, text
    assert strip_controls("a\x1bPdcs left open\nb\u0098sos left open\nc") == "a\nb\nc"


def test_clean_json_cleans_every_string_key_and_value():
    doc = {"model_path": "m\x1b]0;t\x07", "internal_states": [{"k\x1b[1m": ["v\u009b2J", 5, None, True]}]}
    assert clean_json(doc) == {"model_path": "m", "internal_states": [{"k": ["v", 5, None, True]}]}


def test_loads_clean_equals_clean_json_of_loads_for_escapes_and_raw_controls():
    """The fast path (no walk when there is nothing to remove) never lets a control through:
    one brought by a JSON escape (``\\u001b``, ``\\b``, ``\\r``) or raw (C1, bidi) is removed as
    ``clean_json`` removes it; a body without any is returned as parsed."""
    bodies = [
        '{"version": "0.5.23", "args": ["--port", 30000], "ok": true}',
        '{"model": "x\\u001b[31mred\\u001b[0m"}',
        '{"m\\u001b]0;t\\u0007": 1}',
        '{"m": "back\\bspace and \\r return and \\f feed"}',
        '{"m": "raw c1 \u009b31m and bidi \u202e gnp.exe"}',
        '{"m": "tab\\t and newline\\n stay"}',
    ]
    for body in bodies:
        assert loads_clean(body) == clean_json(json.loads(body)), body
    assert loads_clean(bodies[1]) == {"model": "xred"}
    assert loads_clean(bodies[3]) == {"m": "backspace and  return and  feed"}
