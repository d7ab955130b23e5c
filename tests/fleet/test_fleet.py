"""A fleet end to end: two local simulated replicas and one on a "remote" host over real
SSH, behind the real gateway (smg), launched, read, steered, verified and stopped."""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from server_control.fleet.fleet import Fleet
from server_control.fleet.member import exit_code
from server_control.fleet.spec import parse_fleet
from server_control.model.vocabulary import MemberOutcome
from server_control.state.runs import list_records
from tests.fleet.conftest import remote_member, write_profile
from tests.support.sim import free_port, group_pids

pytestmark = pytest.mark.ssh


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    d = tmp_path_factory.mktemp("fleet")
    return {"root": d, "local": d / "local-state", "remote": d / "remote-state"}


@pytest.fixture(scope="module")
def fleet_spec(sshd, dirs):
    d = dirs["root"]
    data = {
        "name": "e2e",
        "poll_interval_s": 0.25,
        "status_interval_s": 2,
        "gateway": {"port": free_port(), "health_check_interval_s": 1, "stop_grace_s": 4},
        "members": {
            "a": {"profile": str(write_profile(d, "ra", traffic="wave:10:20"))},
            "b": {"profile": str(write_profile(d, "rb", traffic="wave:10:20"))},
            "c": remote_member(sshd, write_profile(d, "rc", traffic="wave:10:20"), dirs["remote"]),
            "gone": {"url": f"http://127.0.0.1:{free_port()}", "gateway": False},
        },
    }
    return parse_fleet(data, d / "e2e.toml", "e2e")


@pytest.fixture(scope="module")
def running(fleet_spec, dirs):
    """The fleet launched once for the module's tests (they run in file order)."""
    loop = asyncio.new_event_loop()
    fleet = Fleet(fleet_spec, dirs["local"])
    loop.run_until_complete(fleet.start())
    results = loop.run_until_complete(fleet.act("launch", names=["a", "b", "c"], wait_s=60))
    gateway = loop.run_until_complete(fleet._gateway_action("launch", 30, [r.member for r in results]))
    yield loop, fleet, (*results, gateway)
    loop.run_until_complete(fleet.act("stop", names=["a", "b", "c"]))
    loop.run_until_complete(fleet._gateway_action("stop"))
    loop.run_until_complete(fleet.close())
    loop.close()


def run(loop, coro):
    return loop.run_until_complete(coro)


async def _wait(predicate, timeout_s=30.0):
    for _ in range(int(timeout_s / 0.1)):
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.1)
    return predicate()


def test_launch_all_and_the_gateway_lists_every_member(running, sshd):
    loop, fleet, results = running
    assert [(r.member, r.outcome) for r in results] == [
        ("a", MemberOutcome.OK),
        ("b", MemberOutcome.OK),
        ("c", MemberOutcome.OK),
        ("gateway", MemberOutcome.OK),
    ]
    assert exit_code(results) == 0
    # launch --wait returns once smg routes to every member launched (it adds them asynchronously)
    assert results[-1].detail.endswith("routes to 3 of 3 members"), results[-1].detail
    st = fleet.gateway_status
    assert st is not None and sorted(w.member for w in st.workers if w.healthy) == ["a", "b", "c"]

    async def healthy():
        st = await fleet.read_gateway(reconcile=True)
        return st if st and sorted(w.member for w in st.workers if w.healthy) == ["a", "b", "c"] else None

    status = run(loop, _until(healthy))
    assert status is not None, fleet.gateway_status
    rows = {r.name: r for r in fleet.rows()}
    assert rows["c"].kind == "ssh" and rows["c"].host == sshd.host and rows["c"].state == "ready"
    assert rows["a"].host == "local" and rows["gone"].state == "external" and not rows["gone"].reachable


def test_traffic_through_the_gateway_reaches_the_remote_member(running):
    loop, fleet, _ = running

    async def send():
        async with httpx.AsyncClient(timeout=30) as client:
            for _ in range(6):
                r = await client.post(
                    fleet.gateway.url + "/v1/completions", json={"model": "sim/model", "prompt": "x", "max_tokens": 2}
                )
                assert r.status_code == 200

    run(loop, send())
    store = fleet.members["c"].session.store  # the remote log, mirrored here over SSH
    assert run(loop, _wait(lambda: store.filter(pattern=r'POST /v1/completions HTTP/1.1" 200'))), (
        "the remote member's log shows requests routed by the gateway"
    )


def test_rows_show_every_member_with_its_remote_log_and_verification(running):
    loop, fleet, _ = running
    c = fleet.members["c"]
    assert run(loop, _wait(lambda: c.session.store.filter(pattern="Dynamic speculation disable enabled"))), (
        "the remote member's init line arrived through the mirrored log"
    )
    results = run(loop, fleet.act("verify", names=["a", "c"], wait_s=30))
    assert [(r.member, r.outcome) for r in results] == [("a", MemberOutcome.OK), ("c", MemberOutcome.OK)], results
    rows = {r.name: r for r in fleet.rows()}
    assert rows["c"].marks == "+++" and rows["c"].mode in ("speculative", "target_only")
    assert rows["a"].tok_s and rows["a"].accept_len is not None


def test_threshold_on_all_then_some_read_back_and_refusals_stand_out(running):
    loop, fleet, _ = running
    results = run(loop, fleet.act("threshold", 7, names=["a", "b", "c"]))
    assert {r.outcome for r in results} == {MemberOutcome.OK} and exit_code(results) == 0
    assert all("read back on" in r.detail for r in results)
    assert run(loop, _wait(lambda: all(r.threshold == 7 for r in fleet.rows() if r.name != "gone")))
    results = run(loop, fleet.act("threshold", 9, names=["b"]))
    assert [(r.member, r.outcome) for r in results] == [("b", MemberOutcome.OK)]
    assert run(loop, _wait(lambda: {r.name: r.threshold for r in fleet.rows()} == {"a": 7, "b": 9, "c": 7, "gone": None}))
    bad = run(loop, fleet.act("threshold", -2))
    by = {r.member: r for r in bad}
    assert {m: r.outcome for m, r in by.items()} == {
        "a": MemberOutcome.REFUSED,
        "b": MemberOutcome.REFUSED,
        "c": MemberOutcome.REFUSED,
        "gone": MemberOutcome.REFUSED,
    }
    assert all(r.stands_out for r in bad) and exit_code(bad) == 1 and "must be >= 0" in by["c"].detail
    (silent,) = run(loop, fleet.act("threshold", 8, names=["gone"]))
    assert silent.outcome == MemberOutcome.NO_ANSWER and silent.stands_out and "connection refused" in silent.detail


def test_force_mode_fleet_wide_and_attach_only_members_refuse_life_cycle(running):
    loop, fleet, _ = running
    results = run(loop, fleet.act("force", "speculative", names=["a", "b", "c"]))
    assert {r.outcome for r in results} == {MemberOutcome.OK}
    assert run(
        loop, _wait(lambda: all(r.force == "speculative" and r.mode == "speculative" for r in fleet.rows() if r.name != "gone"))
    )
    assert {r.outcome for r in run(loop, fleet.act("force", "auto", names=["a", "b", "c"]))} == {MemberOutcome.OK}
    launch, stop = run(loop, fleet.act("launch", names=["gone"]))[0], run(loop, fleet.act("stop", names=["gone"]))[0]
    assert (launch.outcome, stop.outcome) == (MemberOutcome.REFUSED, MemberOutcome.REFUSED) and "attached by URL" in launch.detail
    with pytest.raises(KeyError, match="no member 'nobody'"):
        fleet.select(["nobody"])


def test_stop_all_leaves_nothing_running_here_or_there(running, dirs):
    loop, fleet, _ = running
    pgids = [r.pgid for r in list_records(dirs["local"])] + [r.pgid for r in list_records(dirs["remote"])]
    assert len(pgids) == 4  # a, b, the gateway here; c on the "remote host"
    results = run(loop, fleet.act("stop"))
    assert [(r.member, r.outcome) for r in results] == [
        ("a", MemberOutcome.OK),
        ("b", MemberOutcome.OK),
        ("c", MemberOutcome.OK),
        ("gone", MemberOutcome.REFUSED),
        ("gateway", MemberOutcome.OK),
    ]
    assert exit_code(results) == 1  # the attached member refused: the operator sees it
    assert all(group_pids(pg) == [] for pg in pgids)
    assert not list_records(dirs["local"]) and not list_records(dirs["remote"])
    assert run(loop, _wait(lambda: fleet.rows()[2].state == "stopped", 20)), fleet.rows()[2]


async def _until(fn, timeout_s=30.0):
    for _ in range(int(timeout_s / 0.2)):
        value = await fn()
        if value:
            return value
        await asyncio.sleep(0.2)
    return None


def test_remote_host_down_is_no_answer(fleet_spec, dirs, sshd):
    import dataclasses

    c = fleet_spec.member("c")
    dead = dataclasses.replace(c, ssh_options=(*c.ssh_options[:2], "-p", str(free_port()), *c.ssh_options[4:]))
    spec = dataclasses.replace(fleet_spec, members=(dead,), gateway=None)
    loop = asyncio.new_event_loop()
    fleet = Fleet(spec, dirs["root"] / "other-state")
    try:
        loop.run_until_complete(fleet.start())
        row = fleet.rows()[0]
        assert row.state == MemberOutcome.NO_ANSWER and row.error.startswith(f"{sshd.host}: ssh failed")
        (res,) = loop.run_until_complete(fleet.act("launch"))
        assert res.outcome == MemberOutcome.NO_ANSWER and res.stands_out
        (res,) = loop.run_until_complete(fleet.act("stop"))
        assert res.outcome in (MemberOutcome.NO_ANSWER, MemberOutcome.FAILED)
    finally:
        loop.run_until_complete(fleet.close())
        loop.close()
    assert os.environ.get("SPECCONSOLE_STATE_DIR") != str(dirs["remote"])
