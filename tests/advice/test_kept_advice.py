"""The console's advice keeps the curves in the state dir (``read_advice`` with a state
dir, as the supervising session calls it): a real simulator over HTTP, real files. Once
the server is gone, the advice still comes, from the saved curves, saying how old they
are; without a state dir (an attached server) nothing is kept and nothing comes."""

from __future__ import annotations

import pytest

from server_control.advice.source import SourceError, advice_from, poll_reading, read_advice
from server_control.advice.store import CurvesHome
from server_control.host.ports import free_port
from server_control.session.run_backends import AttachedRun
from server_control.session.session import Session
from tests.support.advice import wait_steps


def test_the_curves_outlive_the_server(sim_factory, tmp_path):
    state = tmp_path / "state"
    sim = sim_factory("--sim-explore-share", "0.1", threshold=8, traffic="phases:s=10000,c=1-14,period=12", time_scale=20)
    sim.wait_ready()
    wait_steps(sim.url, steps=1500)
    live = read_advice(sim.url, None, state)
    assert live.current == 8 and live.suggested is not None
    assert "saved" not in live.sentence
    assert len(list((state / "advice").glob("*.json"))) == 1
    sim.stop()
    with pytest.raises(SourceError):  # the negative control: nothing kept without a state dir
        read_advice(sim.url, None, None)
    later = read_advice(sim.url, None, state)
    assert later.suggested is not None and abs(later.suggested - live.suggested) <= 1
    assert "server did not answer; from the curves saved " in later.sentence and later.sentence.endswith(" ago)")
    assert later.saved_only and not live.saved_only and later.to_json()["saved_only"] is True
    # a console just opened: no poll has come back yet. Not "did not answer" (issue 35: every
    # console open said so for 10-30 s while the server answered); the strip asks again soon
    home = CurvesHome(state, sim.url)
    opening = advice_from(lambda: poll_reading(sim.url, False, None, None, None), sim.url, home)
    assert "(server not read yet; from the curves saved " in opening.sentence and opening.saved_only
    failing = advice_from(lambda: poll_reading(sim.url, False, "connection refused", None, None), sim.url, home)
    assert "(server did not answer; from the curves saved " in failing.sentence
    with pytest.raises(SourceError):  # another state dir holds nothing for it
        read_advice(sim.url, None, tmp_path / "other")


class _Supervised(AttachedRun):
    def __init__(self, state_dir):
        super().__init__()
        self.state_dir = state_dir

    def curves_home(self, url):
        return CurvesHome(self.state_dir, url)


async def test_only_the_supervising_session_keeps_curves(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr("server_control.session.session.advice_from", lambda *a: asked.append(a) or "advice")
    url = f"http://127.0.0.1:{free_port()}"
    assert await Session(url, _Supervised(tmp_path)).advice() == "advice"
    assert await Session(url, AttachedRun()).advice() == "advice"
    assert [a[2] for a in asked] == [CurvesHome(tmp_path, url), None]
