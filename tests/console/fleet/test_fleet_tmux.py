"""The fleet screen in a real terminal (issue 23 item 6): `specconsole fleet` in tmux, TERM=xterm,
at 120x40 and then resized to 80x24, over two simulators attached by URL and one member that
does not answer. The header is whole at both sizes, the aggregate line counts the live
members and names the one down, the sorted column carries its arrow, ctrl+p lists the fleet's
actions. Stops what it started: the tmux server on its own socket, the simulators by their
process groups."""

from __future__ import annotations

import shutil
import sys

import pytest

from tests.support.sim import free_port, start_sim
from tests.support.tmux import Term

pytestmark = [
    pytest.mark.tmux,
    pytest.mark.timeout(240),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]


def test_fleet_screen_at_120x40_and_80x24(tmp_path):
    sims = [start_sim(tmp_path, "--sim-light", tp=1, lifetime=150) for _ in range(2)]
    t = Term(tmp_path, size=(120, 40))
    try:
        for s in sims:
            s.wait_ready()
        fleet = tmp_path / "tm.toml"
        fleet.write_text(
            'name = "tmux-fleet-eu-west"\npoll_interval_s = 0.5\n'
            f'[members.a]\nurl = "{sims[0].url}"\ngateway = false\n'
            f'[members.b]\nurl = "{sims[1].url}"\ngateway = false\n'
            f'[members.c]\nurl = "http://127.0.0.1:{free_port()}"\ngateway = false\n'
        )
        t.start(f"{sys.executable} -m console fleet --fleet {fleet} --no-mouse; sleep 30")
        text = t.wait(lambda s: "live 2/3" in s, timeout=90, what="the aggregate line")
        for size in ((120, 40), (80, 24)):
            if size != (120, 40):
                t.tmux("resize-window", "-t", "t", "-x", str(size[0]), "-y", str(size[1]), check=True)
                text = t.wait(lambda s: len(s.splitlines()[0]) <= 80 and "live 2/3" in s, what="the resize")
            lines = text.splitlines()
            header = lines[0]
            assert "tmux-fleet-eu-west: 3 members" in header and "\u2026" not in header, (size, header)
            aggregate = next(x for x in lines if "tok/s" in x and "live" in x)
            assert "live 2/3" in aggregate and "(down: c)" in aggregate, (size, aggregate)
            assert "MEMBER\u25b2" in text, (size, text)
        t.keys("C-p")
        text = t.wait(lambda s: "Fleet: Set threshold N" in s, what="the fleet's actions in the palette")
        assert "Toggle following" not in text
    finally:
        t.close()
        for s in sims:
            s.stop()
