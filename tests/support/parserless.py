"""The shipped tp8 profile, served by this interpreter without its site-packages.

``launch --dry-run`` asks SGLang's real parser in a fresh interpreter of the profile's Python,
which imports sglang and torch (~7 CPU-s). A test about what the dry run shows (the command
line, a masked key, an unset key's placeholder) runs the shipped profile by this wrapper: the
parser is unreachable, the dry run says so on stderr and shows the command all the same, and
the fast loop pays no SGLang import. The parser's own verdicts are the SGLang tier's
(``tests/real_sglang/test_argv_parse.py``, the ``sglang``-marked case of the tp8 dry run)."""

from __future__ import annotations

import sys
from pathlib import Path

from server_control.config.assets import profile_path

UNREACHABLE = "cannot import sglang"  # what the dry run says on stderr without the parser


def tp8_without_parser(tmp_path: Path) -> Path:
    python = tmp_path / "python-without-site"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    python.chmod(0o755)
    shipped = profile_path("eagle3-tp8").read_text()
    assert 'python = ""' in shipped
    path = tmp_path / "eagle3-tp8.toml"
    path.write_text(shipped.replace('python = ""', f'python = "{python}"', 1))
    return path
