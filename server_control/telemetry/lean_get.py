"""The poller's GET on plain ``http://``: HTTP/1.1 on one kept-alive connection, written
and parsed here on asyncio streams.

    lean = LeanGet("http://127.0.0.1:30000", {"Authorization": "Bearer k"}, timeout_s=2.0)
    resp = await lean.get("/server_info", max_bytes=MAX_BODY_BYTES, deadline_s=4.0)  # httpx.Response
    await lean.aclose()

Why: httpx spends about 1.2 ms of CPU on each request to a loopback server; this spends
about 0.18 ms (a 2 KB ``/server_info`` from the simulator). A console polls every member
of a fleet once or twice a second, and that was the largest part of the fleet screen's cost
(docs/console.md). It answers as ``bounded_request`` does (http_poll.py): a complete
``httpx.Response`` (``raise_for_status`` works), a body over ``max_bytes`` raises
``AnswerTooLarge``, the whole answer within ``deadline_s`` and each read within
``timeout_s`` (else ``httpx.ReadTimeout``), nothing listening ``httpx.ConnectError``, a
broken answer ``httpx.RemoteProtocolError``. A kept connection the server closed while idle
is opened again once. Only GET, only ``http://`` (``https://`` goes through httpx), no
redirects followed, no proxy (as the poller's httpx client: ``trust_env=False``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from server_control.net.http import AnswerTooLarge
from server_control.net.lean_httpx import httpx

HEAD_LIMIT = 64 << 10  # status line and headers at most this long


class _Closed(Exception):
    """A kept connection ended before any byte of the answer: open a new one and ask again."""


class LeanGet:
    def __init__(self, base_url: str, headers: dict[str, str] | None = None, timeout_s: float = 2.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"LeanGet takes a plain http:// URL, not {base_url!r}")
        self.base = base_url.rstrip("/")
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s
        netloc = f"[{self.host}]" if ":" in self.host else self.host
        self._head = f"Host: {netloc}:{self.port}\r\nUser-Agent: specconsole\r\nAccept: */*\r\nAccept-Encoding: identity\r\n"
        self._head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._requests: dict[str, httpx.Request] = {}
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.connections = 0  # connections opened so far (kept alive between requests)

    async def aclose(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass

    def _request(self, path: str) -> httpx.Request:
        req = self._requests.get(path)
        if req is None:
            req = self._requests[path] = httpx.Request("GET", self.base + path)
        return req

    async def get(self, path: str, *, max_bytes: int, deadline_s: float) -> httpx.Response:
        request = self._request(path)
        end = time.monotonic() + deadline_s
        try:
            async with asyncio.timeout(None) as timer:
                try:
                    return await self._exchange(path, request, max_bytes, end, timer, reused=self._writer is not None)
                except _Closed:
                    await self.aclose()
                    return await self._exchange(path, request, max_bytes, end, timer, reused=False)
        except TimeoutError:
            await self.aclose()
            if time.monotonic() >= end - 0.01:
                raise httpx.ReadTimeout(f"no complete answer within {deadline_s:g} s", request=request) from None
            raise httpx.ReadTimeout(f"nothing read within {self.timeout_s:g} s", request=request) from None
        except BaseException:
            await self.aclose()  # the connection is in an unknown state: never reused
            raise

    async def _exchange(
        self, path: str, request: httpx.Request, max_bytes: int, end: float, timer: asyncio.Timeout, *, reused: bool
    ) -> httpx.Response:
        def step() -> None:  # each read within timeout_s, the whole answer before ``end``
            timer.reschedule(min(end, time.monotonic() + self.timeout_s))

        step()
        if self._writer is None:
            try:
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=HEAD_LIMIT)
            except OSError as exc:
                raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from None
            self.connections += 1
        reader, writer = self._reader, self._writer
        assert reader is not None
        writer.write(f"GET {self.prefix}{path} HTTP/1.1\r\n{self._head}\r\n".encode("latin-1"))
        step()
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if reused and not exc.partial:
                raise _Closed from None
            raise httpx.RemoteProtocolError("the server closed the connection before answering", request=request) from None
        except ConnectionError as exc:
            if reused:
                raise _Closed from None
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from None
        except asyncio.LimitOverrunError:
            raise AnswerTooLarge(f"answer too large (headers over {HEAD_LIMIT} bytes)", request=request) from None
        status, version, headers = _parse_head(head, request)
        names = {k.lower(): v for k, v in headers}
        body = await _body(reader, names, max_bytes, request, step)
        if version != "HTTP/1.1" or "close" in names.get("connection", "").lower() or _until_eof(names):
            await self.aclose()
        kept = [(k, v) for k, v in headers if k.lower() not in ("content-encoding", "transfer-encoding", "content-length")]
        return httpx.Response(status, headers=kept, content=body, request=request)


def _parse_head(head: bytes, request: httpx.Request) -> tuple[int, str, list[tuple[str, str]]]:
    lines = head.decode("latin-1").split("\r\n")
    bits = lines[0].split(" ", 2)
    if len(bits) < 2 or not bits[0].startswith("HTTP/") or not bits[1].isdigit():
        raise httpx.RemoteProtocolError(f"not an HTTP answer: {lines[0][:80]!r}", request=request)
    headers = []
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise httpx.RemoteProtocolError(f"malformed header line {line[:80]!r}", request=request)
            headers.append((name.strip(), value.strip()))
    return int(bits[1]), bits[0], headers


def _until_eof(names: dict[str, str]) -> bool:
    return "content-length" not in names and "chunked" not in names.get("transfer-encoding", "").lower()


Step = Callable[[], None]


async def _body(reader: asyncio.StreamReader, names: dict[str, str], max_bytes: int, request: httpx.Request, step: Step) -> bytes:
    encoding = names.get("content-encoding", "identity").lower()
    if encoding not in ("", "identity"):
        raise httpx.DecodingError(f"content-encoding {encoding!r} (identity was asked for)", request=request)
    try:
        if "chunked" in names.get("transfer-encoding", "").lower():
            return await _chunked(reader, max_bytes, request, step)
        declared = names.get("content-length")
        if declared is not None:
            return await _sized(reader, declared, max_bytes, request, step)
        return await _until_closed(reader, max_bytes, request, step)
    except asyncio.IncompleteReadError:
        raise httpx.RemoteProtocolError("the server closed the connection mid-answer", request=request) from None
    except asyncio.LimitOverrunError:
        raise httpx.RemoteProtocolError("a chunk header without end", request=request) from None
    except ConnectionError as exc:
        raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from None


async def _chunked(reader: asyncio.StreamReader, max_bytes: int, request: httpx.Request, step: Step) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        step()
        line = await reader.readuntil(b"\r\n")
        try:
            n = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise httpx.RemoteProtocolError(f"bad chunk size {line[:40]!r}", request=request) from None
        if n == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the end
                step()
            return b"".join(chunks)
        size += n
        if size > max_bytes:
            raise AnswerTooLarge(f"answer too large (over {max_bytes} bytes)", request=request)
        chunks.append(await reader.readexactly(n))
        await reader.readexactly(2)


async def _sized(reader: asyncio.StreamReader, declared: str, max_bytes: int, request: httpx.Request, step: Step) -> bytes:
    if not declared.isdigit():
        raise httpx.RemoteProtocolError(f"bad Content-Length {declared[:40]!r}", request=request)
    left = int(declared)
    if left > max_bytes:
        raise AnswerTooLarge(f"answer too large ({left} bytes, over {max_bytes})", request=request)
    parts: list[bytes] = []
    while left:  # in pieces: each within timeout_s
        step()
        got = await reader.readexactly(min(left, 1 << 20))
        parts.append(got)
        left -= len(got)
    return b"".join(parts)


async def _until_closed(reader: asyncio.StreamReader, max_bytes: int, request: httpx.Request, step: Step) -> bytes:
    parts: list[bytes] = []
    size = 0
    while True:  # neither length nor chunks: the body ends with the connection
        step()
        got = await reader.read(65536)
        if not got:
            return b"".join(parts)
        size += len(got)
        if size > max_bytes:
            raise AnswerTooLarge(f"answer too large (over {max_bytes} bytes)", request=request)
        parts.append(got)
