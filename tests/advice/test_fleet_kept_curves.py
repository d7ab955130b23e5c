"""The fleet keeps each remote or URL member's cost curves in its own state dir, under the
member's name and place (a remote member's URL is a tunnel's local port, new every run), so
that the next fleet console advises from them while the member does not answer. A real
simulator attached by URL, the real Fleet and its member sessions, real files."""

from __future__ import annotations

import asyncio

import pytest

from server_control.advice.source import SourceError
from server_control.fleet.fleet import Fleet
from server_control.fleet.member import curves_home
from server_control.fleet.spec import LOCAL, MemberSpec, parse_fleet
from tests.support.advice import wait_steps

pytestmark = pytest.mark.timeout(180)


def _spec(url: str):
    return parse_fleet({"name": "kept", "poll_interval_s": 0.3, "members": {"m1": {"url": url, "gateway": False}}})


async def _advice(fleet: Fleet, timeout: float = 20.0):
    member = fleet.members["m1"]
    await member.start()
    try:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:  # the first poll's answer (or its failure) is what the advice reads
            if member.session.polls >= 1 or asyncio.get_running_loop().time() > deadline:
                return await member.session.advice()
            await asyncio.sleep(0.2)
    finally:
        await member.close()


async def test_a_url_members_curves_outlive_the_fleet_console(sim_factory, tmp_path):
    state = tmp_path / "state"
    sim = sim_factory("--sim-explore-share", "0.1", threshold=8, traffic="phases:s=10000,c=1-14,period=12", time_scale=20)
    sim.wait_ready()
    wait_steps(sim.url, steps=1500)
    live = await _advice(Fleet(_spec(sim.url), state))
    assert live.current == 8 and live.suggested is not None and "saved" not in live.sentence
    kept = list((state / "fleet" / "kept" / "curves" / "advice").glob("*.json"))
    assert len(kept) == 1
    sim.stop()
    later = await _advice(Fleet(_spec(sim.url), state))  # a new fleet console, the member gone
    assert later.suggested is not None and abs(later.suggested - live.suggested) <= 1
    assert "server did not answer; from the curves saved " in later.sentence
    with pytest.raises(SourceError):  # the negative control: a fleet that does not supervise keeps and reads nothing
        await _advice(Fleet(_spec(sim.url), state, supervise=False))


def test_a_remote_members_curves_are_kept_by_name_not_by_tunnel_port(tmp_path):
    spec = parse_fleet(
        {
            "name": "f",
            "members": {"r1": {"host": "gpu-host-1", "profile": "p.toml"}, "r2": {"host": "gpu-host-2", "profile": "p.toml"}},
        }
    )
    r1, r2 = spec.members
    home = curves_home(spec, r1, tmp_path)
    assert home is not None and home == curves_home(spec, r1, tmp_path)  # whatever port its tunnel takes
    assert home.state_dir == tmp_path / "fleet" / "f" / "curves"
    assert home.key == "f/r1@gpu-host-1" and curves_home(spec, r2, tmp_path).key == "f/r2@gpu-host-2"
    assert curves_home(spec, MemberSpec("l", LOCAL), tmp_path) is None  # a local run keeps its own
