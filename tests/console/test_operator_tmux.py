"""Issue 14 in a real terminal: `specconsole demo` in tmux at 120x40 (TERM=xterm, 16
colours), keys by send-keys, the screen by capture-pane. One demo for all the checks (CI
time); stops what it started: the tmux server on its own socket, the simulator by the
pgid of its run record."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from server_control.host.ports import free_port
from server_control.state import runs
from tests.support.tmux import Term

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]
REPO = Path(__file__).resolve().parents[2]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def test_operator_screen_in_a_16_colour_terminal(tmp_path):
    t = Term(tmp_path)
    cmd = f"{sys.executable} -m console demo --port {free_port()} --time-scale 5 --no-mouse; sleep 30"
    rec = None
    supervise = None
    t.start(cmd)
    try:
        t.wait(lambda s: "READY" in s and "N=5" in s, what="READY and N=5")
        rec = runs.load_record("demo", t.state / "demo")
        # 1: polling lines hidden and counted
        text = t.wait(lambda s: "polls hidden" in s, what="the hidden-polls count")
        assert "GET /server_info" not in text and "GET /v1/loads" not in text
        # 11: the verification marks in one of the terminal's 16 colours (they were a
        # 256-colour green, 38;5;70, grey on grey with TERM=xterm)
        text = t.wait(lambda s: "\u2713" in s.splitlines()[0], what="a check mark", escapes=True)
        first = text.splitlines()[0]
        assert re.search(r"\x1b\[(3[0-7]|9[0-7])m\u2713", first), first
        # 4: a switch line is cyan, never the red of errors (it was 38;5;197, as red as errors).
        # Filtered to the switch lines with `&`, as an operator would: a followed log at time
        # scale 5 scrolls one away between two captures (CI, stop 43, 15 switches unseen)
        t.keys("&", literal=True)
        t.wait(lambda s: "Filter: regex" in s, what="the filter prompt")
        t.keys("Dynamic speculation: switched", literal=True)
        t.keys("Enter")
        # a log line says "switched to ...": the prompt still on screen holds the typed
        # filter "... switched" (a loaded machine captured it before Enter was handled)
        text = t.wait(
            lambda s: "Dynamic speculation: switched to" in s and "Filter: regex" not in s,
            timeout=90,
            what="a switch line, the prompt closed",
            escapes=True,
        )
        line = next(x for x in text.splitlines() if "Dynamic speculation: switched to" in x)
        assert "\x1b[36m" in line and "38;5;197" not in line, line
        assert "Decode batch" not in t.screen()  # the filter holds only switch lines
        t.keys("Escape")
        # 12: the chart has a time axis at 120x40
        t.wait(lambda s: re.search(r"-\d+s .* now", s) is not None, what="a time axis under the chart")
        # 2: - stops at 1
        for _ in range(6):
            t.keys("-", literal=True)
            time.sleep(0.3)
        text = t.wait(lambda s: "N=1 applied" in s, what="N=1 applied")
        assert "N=0" not in text.splitlines()[0] and "stops at 1" in text  # the header, the toast
        # 7: k moves, never filters
        t.keys("k")
        time.sleep(0.5)
        assert "rank TP" not in t.screen()
        # 9: Enter in the quit dialog leaves the simulator running, in the demo too
        t.keys("q")
        t.wait(lambda s: "Leave" in s and "supervis" in s, what="the quit question")
        t.keys("Enter")
        text = t.wait(
            lambda s: "leftrunning" in re.sub(r"\s+", "", s) and "restartsacrash" in re.sub(r"\s+", "", s),
            what="the farewell line",
        )
        assert rec is not None and rec.is_live()
        # the farewell wraps where the state dir's path puts it (a space can be lost at the wrap)
        found = re.search(r"detached\)\(pid(\d+)\)restartsacrash", re.sub(r"\s+", "", text))
        supervise = int(found.group(1)) if found else None
        assert supervise == (runs.load_record("demo", t.state / "demo").supervisor or {}).get("pid"), text
    finally:
        # what Enter left running: the run's own detached supervise (stopped first, by
        # the pid it printed, so it cannot restart what `stop` ends) and the simulator
        # (stopped as an operator would, then by its group if a record still says it lives)
        for pid in [supervise] if supervise else []:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
                time.sleep(0.1)
        subprocess.run(
            [sys.executable, "-m", "console", "stop", "--demo", "--state-dir", str(t.state / "demo")],
            env=t.env,
            timeout=60,
            capture_output=True,
        )
        t.close()
        try:
            last = runs.load_record("demo", t.state / "demo")
        except runs.RunRecordError:
            last = None
        for r in {x.pgid: x for x in (rec, last) if x is not None and x.is_live()}.values():
            try:
                os.killpg(r.pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass
