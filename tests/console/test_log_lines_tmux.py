"""The log view's go-to-line and its search marks in a real terminal under NO_COLOR (issue 23
item 8): `specconsole demo` in tmux at 120x40, TERM=xterm, NO_COLOR=1; `:` 1 marks the
log's first line (numbers on, `▶`); the current search match is in reverse video (with every
colour dropped, the old marks were invisible). Stops what it started: `q` then `s` stops the
simulator, and the finally stops it by its run record's pgid if it is still there."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from server_control.state import runs
from tests.support.sim import free_port
from tests.support.tmux import Term

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]


def test_goto_line_and_the_current_match_under_no_color(tmp_path):
    t = Term(tmp_path)
    t.env["NO_COLOR"] = "1"
    t.start(f"{sys.executable} -m console demo --port {free_port()} --time-scale 5 --no-mouse; sleep 30")
    rec = None
    try:
        t.wait(lambda s: "READY" in s and "N=5" in s, what="READY and N=5")
        rec = runs.load_record("demo", t.state / "demo")
        t.keys(":", literal=True)
        t.wait(lambda s: "Go to log line" in s, what="the go-to-line prompt")
        t.keys("1", "Enter")
        text = t.wait(lambda s: re.search(r"^\s+1\u25b6 ", s, re.M) is not None, what="line 1 marked")
        assert not re.search(r"^\s+2\u25b6 ", text, re.M)
        t.keys("/")
        t.wait(lambda s: "Search: regex" in s, what="the search prompt")
        t.keys("speculation disable", literal=True)
        t.keys("Enter")
        t.wait(lambda s: "search: /speculation disable/" in s, what="the search status")
        # the jump to the match is drawn after the status line; under load that can take seconds
        text = t.wait(
            lambda s: any("speculation disable" in x and "\u25b6" in x for x in s.splitlines()),
            timeout=30,
            what="the current match's line marked",
            escapes=True,
        )
        line = next(x for x in text.splitlines() if "speculation disable" in x and "\u25b6" in x)
        # the match itself in reverse video: SGR 7 before its text
        assert re.search(r"\x1b\[(?:[0-9;]*;)?7(?:;[0-9;]*)?m[^\x1b]*speculation disable", line), line
        assert not re.search(r"\x1b\[[0-9;]*(3[0-8]|4[0-8]|9[0-7])[;m]", line), "NO_COLOR: no colour at all"
        t.keys("q")
        t.wait(lambda s: "stop" in s.lower() and "leave" in s.lower(), what="the quit question")
        t.keys("s")
        t.wait(lambda s: rec is not None and not rec.is_live(), timeout=60, what="the demo stopped")
    finally:
        subprocess.run(
            [sys.executable, "-m", "console", "stop", "--demo", "--state-dir", str(t.state / "demo")],
            env=t.env,
            timeout=60,
            capture_output=True,
        )
        t.close()
        if rec is not None and rec.is_live():
            try:
                os.killpg(rec.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
