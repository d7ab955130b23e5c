"""``free_port`` never hands one process the same port twice: the OS may give one free port to
two calls made before either is bound, and a fleet's gateway and its members' profiles (or two
remote members' tunnels) then took the same port: a fleet fixture's spec was refused with
"[gateway] port: 51243 is the port of member b" (a six-worker fast loop, 2026-12-07)."""

from __future__ import annotations

import socket

import pytest

from server_control.host import ports


class _ScriptedSocket:
    """A socket whose bind to port 0 gets the next of ``given`` (what the OS chose)."""

    given: list[int] = []

    def __init__(self, *_args) -> None:
        self.port = 0

    def __enter__(self):
        return self

    def __exit__(self, *_exc) -> None:
        return None

    def bind(self, address) -> None:
        self.port = self.given.pop(0)

    def getsockname(self):
        return ("127.0.0.1", self.port)


@pytest.fixture
def os_gives(monkeypatch):
    def give(*seq: int) -> None:
        _ScriptedSocket.given = list(seq)
        monkeypatch.setattr(socket, "socket", _ScriptedSocket)  # the module ports binds with

    monkeypatch.setattr(ports, "_handed_out", set(), raising=False)
    return give


def test_a_port_the_os_gives_twice_is_handed_out_once(os_gives):
    os_gives(41001, 41001, 41001, 41002)
    assert [ports.free_port(), ports.free_port()] == [41001, 41002]


def test_hosts_are_kept_apart(os_gives):
    os_gives(41003, 41003)
    assert ports.free_port("127.0.0.1") == 41003 and ports.free_port("0.0.0.0") == 41003


def test_real_ports_are_distinct_and_bindable():
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50
    with socket.socket() as s:
        s.bind(("127.0.0.1", got[-1]))
