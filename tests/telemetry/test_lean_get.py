"""The poller's own HTTP/1.1 GET (server_control/telemetry/lean_get.py) against real sockets
on loopback: servers written here byte by byte, each answering in one of the ways a server
may (kept alive, closed while idle, chunked, until EOF, silent, too large, 404)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from server_control.host.ports import free_port
from server_control.net.http import MAX_BODY_BYTES, AnswerTooLarge, describe_error
from server_control.telemetry.http_poll import HttpPoller
from server_control.telemetry.lean_get import LeanGet

BODY = b'{"version": "0.5.23", "internal_states": []}'


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        got = conn.recv(4096)
        if not got:
            return b""
        data += got
    return data


class Server:
    """A loopback server whose ``answer(conn, request, n)`` writes the n-th answer on a
    connection; it returns False to close the connection. Counts connections."""

    def __init__(self, answer: Callable[[socket.socket, bytes, int], bool]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", free_port()))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        with conn:
            n = 0
            while not self._stop.is_set():
                try:
                    req = _read_request(conn)
                    if not req:
                        return
                    self.requests.append(req)
                    if not self.answer(conn, req, n):
                        return
                except OSError:
                    return
                n += 1

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        self._thread.join(5)


@pytest.fixture
def server():
    made: list[Server] = []

    def make(answer: Callable[[socket.socket, bytes, int], bool]) -> Server:
        made.append(Server(answer))
        return made[-1]

    yield make
    for s in made:
        s.close()


def kept_alive(conn: socket.socket, req: bytes, n: int) -> bool:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(BODY), BODY))
    return True


async def test_answers_over_one_kept_connection(server):
    srv = server(kept_alive)
    lean = LeanGet(srv.url, {"Authorization": "Bearer k1"}, timeout_s=2.0)
    try:
        got = [await lean.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=4.0) for _ in range(5)]
    finally:
        await lean.aclose()
    assert [(r.status_code, r.content, r.headers["content-type"]) for r in got] == [(200, BODY, "application/json")] * 5
    assert got[0].json()["version"] == "0.5.23" and str(got[0].request.url) == srv.url + "/server_info"
    assert srv.connections == 1 and lean.connections == 1
    assert srv.requests[0].startswith(b"GET /server_info HTTP/1.1\r\n") and b"\r\nAuthorization: Bearer k1\r\n" in srv.requests[0]


async def test_a_connection_the_server_closed_while_idle_is_opened_again(server):
    def once(conn: socket.socket, req: bytes, n: int) -> bool:
        kept_alive(conn, req, n)
        return False  # closes without saying so (no "Connection: close"), as a keep-alive timeout does

    srv = server(once)
    lean = LeanGet(srv.url, timeout_s=2.0)
    try:
        for _ in range(3):
            resp = await lean.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)
            assert resp.content == BODY
            time.sleep(0.05)  # the server's close reaches us before the next request
    finally:
        await lean.aclose()
    assert srv.connections == 3


async def test_chunked_with_trailers_and_a_body_until_eof(server):
    def chunked(conn: socket.socket, req: bytes, n: int) -> bool:
        if n == 0:
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b'5;ext=1\r\n{"a":\r\n4\r\n [1]\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
            )
            return True
        conn.sendall(b"HTTP/1.0 200 OK\r\n\r\n" + BODY)  # no length: the body ends with the connection
        return False

    srv = server(chunked)
    lean = LeanGet(srv.url, timeout_s=2.0)
    try:
        first = await lean.get("/a", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)
        second = await lean.get("/b", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)
    finally:
        await lean.aclose()
    assert first.json() == {"a": [1]} and "transfer-encoding" not in first.headers
    assert second.content == BODY
    assert srv.connections == 1  # the chunked answer left the connection usable


async def test_status_errors_and_nothing_listening(server):
    def not_found(conn: socket.socket, req: bytes, n: int) -> bool:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found")
        return True

    srv = server(not_found)
    lean = LeanGet(srv.url, timeout_s=2.0)
    try:
        resp = await lean.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)
        with pytest.raises(httpx.HTTPStatusError) as exc:
            resp.raise_for_status()
        assert exc.value.response.status_code == 404
    finally:
        await lean.aclose()
    nobody = LeanGet(f"http://127.0.0.1:{free_port()}", timeout_s=2.0)
    with pytest.raises(httpx.ConnectError) as refused:
        await nobody.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)
    assert "connection refused" in describe_error(refused.value, "x/server_info")


async def test_a_silent_server_times_out_after_the_read_timeout(server):
    def silent(conn: socket.socket, req: bytes, n: int) -> bool:
        time.sleep(3)
        return False

    srv = server(silent)
    lean = LeanGet(srv.url, timeout_s=0.3)
    t0 = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        await lean.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=2.0)
    assert time.monotonic() - t0 < 1.5  # the read timeout (0.3 s), not the overall deadline


async def test_a_declared_body_over_the_cap_is_not_read(server):
    def huge(conn: socket.socket, req: bytes, n: int) -> bool:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\n" + b"1" * 1000)
        return False

    srv = server(huge)
    lean = LeanGet(srv.url, timeout_s=2.0)
    with pytest.raises(AnswerTooLarge, match="5000000 bytes, over 1000"):
        await lean.get("/x", max_bytes=1000, deadline_s=4.0)


async def test_the_poller_asks_plain_http_through_it_and_https_through_httpx(server):
    srv = server(kept_alive)
    poller = HttpPoller(srv.url, api_key="k2", timeout_s=2.0)
    try:
        for _ in range(3):
            await poller.get_json("/server_info")
        assert poller._client is None and poller.lean() is not None and poller.lean().connections == 1  # type: ignore[union-attr]
        assert b"User-Agent: specconsole\r\n" in srv.requests[0] and b"Authorization: Bearer k2\r\n" in srv.requests[0]
    finally:
        await poller.aclose()
    assert HttpPoller("https://127.0.0.1:9").lean() is None
