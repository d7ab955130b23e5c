"""A control request must not go out on a connection the server is closing for idleness.

SGLang (``SGLANG_TIMEOUT_KEEP_ALIVE``) and uvicorn close an idle connection after 5 s, and
httpx keeps one for reuse 5 s by default: a request sent about 5 s after the last one can
leave on a connection whose close is already on its way, and fails with a ReadError (a
fleet test under load: ``/set_internal_state: ReadError``, the server alive and well).
The control-plane clients keep an idle connection for less than the server does
(``net.http.KEEPALIVE_EXPIRY_S``). Here a loopback server drops, unanswered, a request
that arrives on a connection idle past its own limit, as a server whose idle timer fired
while the request was in flight."""

from __future__ import annotations

import asyncio
import time

from server_control.control.settings import Control
from server_control.net.http import KEEPALIVE_EXPIRY_S, bounded_request
from server_control.telemetry.http_poll import HttpPoller

SERVER_IDLE_S = KEEPALIVE_EXPIRY_S + 0.2  # the server's limit: longer than the client keeps it
IDLE_S = KEEPALIVE_EXPIRY_S + 0.5  # the pause between the two requests


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, served: list[str]) -> None:
    last = None
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")), 0)
            if length:
                await reader.readexactly(length)
            if last is not None and time.monotonic() - last > SERVER_IDLE_S:
                served.append("dropped")
                break  # closed unanswered: the idle timer fired as the request came in
            served.append("answered")
            body = b"[true]"
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            last = time.monotonic()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _twice(make_client) -> list[str]:
    served: list[str] = []
    server = await asyncio.start_server(lambda r, w: _serve(r, w, served), "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    owner, client = make_client(url)
    try:
        for _ in range(2):
            resp = await bounded_request(client, "POST", url + "/set_internal_state", json={"server_args": {}})
            assert resp.status_code == 200
            await asyncio.sleep(IDLE_S)
    finally:
        await owner.aclose()
        server.close()
    return served


def test_the_control_client_opens_a_new_connection_after_an_idle_pause():
    def control(url):
        c = Control(url)
        return c, c.client()

    assert asyncio.run(_twice(control)) == ["answered", "answered"]


def test_the_poller_does_too():
    def poller(url):
        p = HttpPoller(url)
        return p, p.client()

    assert asyncio.run(_twice(poller)) == ["answered", "answered"]
