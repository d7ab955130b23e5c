"""HTTP mechanics every control-plane client shares: a request read with a size cap and an
overall deadline (``bounded_request``), the bearer header, and one line for what failed
(``describe_error``; ``no_answer`` tells nothing answering from a wrong answer)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from server_control.net.lean_httpx import httpx
from server_control.sanitize import strip_controls

MAX_BODY_BYTES = 4 << 20  # every answer a control-plane client reads is capped at this
# SGLang (SGLANG_TIMEOUT_KEEP_ALIVE) and uvicorn close a connection idle for 5 s, and httpx
# keeps one for reuse 5 s by default: a request ~5 s after the last could leave on a
# connection whose close is on its way (a ReadError, the server well). Kept for less here.
KEEPALIVE_EXPIRY_S = 2.0


def client_limits(**kw: Any) -> httpx.Limits:
    """httpx's pool limits for a client of a server (``kw``: httpx.Limits' other fields),
    idle connections kept ``KEEPALIVE_EXPIRY_S``."""
    return httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S, **kw)


class AnswerTooLarge(httpx.RequestError):
    """The server's answer (its body) is larger than the cap: not read further."""


async def bounded_request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    max_bytes: int = MAX_BODY_BYTES,
    deadline_s: float | None = None,
    **kw: Any,
) -> httpx.Response:
    """One request whose body is read up to ``max_bytes`` (more: ``AnswerTooLarge``) and
    which ends within ``deadline_s`` overall (``httpx.ReadTimeout``), however the server
    trickles its bytes; ``deadline_s`` None: the client's read timeout (at least 1 s) x 2.
    Returns a complete ``httpx.Response`` (status, headers, content)."""
    if deadline_s is None:
        read = client.timeout.read
        deadline_s = 2.0 * max(1.0, read if read is not None else 5.0)
    request = client.build_request(method, url, **kw)
    try:
        async with asyncio.timeout(deadline_s):
            resp = await client.send(request, stream=True)
            try:
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise AnswerTooLarge(f"answer too large ({int(declared)} bytes, over {max_bytes})", request=request)
                chunks, size = [], 0
                async for chunk in resp.aiter_bytes():
                    size += len(chunk)
                    if size > max_bytes:
                        raise AnswerTooLarge(f"answer too large (over {max_bytes} bytes)", request=request)
                    chunks.append(chunk)
            finally:
                await resp.aclose()
    except TimeoutError:
        raise httpx.ReadTimeout(f"no complete answer within {deadline_s:g} s", request=request) from None
    headers = [
        (k, v)
        for k, v in resp.headers.multi_items()
        if k.lower() not in ("content-encoding", "transfer-encoding", "content-length")
    ]
    return httpx.Response(resp.status_code, headers=headers, content=b"".join(chunks), request=request)


def auth_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


TIMED_OUT = "timed out"
REFUSED = "connection refused or host unreachable"


def no_answer(error: str | None) -> bool:
    """Whether ``describe_error``'s line says nothing answered (refused, unreachable, timed
    out), not that something answered wrongly (too large, an HTTP error, bad JSON)."""
    if not error:
        return False
    return f": {REFUSED}" in error or error.endswith(f": {TIMED_OUT}")


def describe_error(exc: BaseException, what: str) -> str:
    """One line naming what failed (``what``: the endpoint or its URL) and why (what a
    server said in it, a reason phrase or a body, is made terminal-safe)."""
    if isinstance(exc, httpx.TimeoutException):
        return f"{what}: {TIMED_OUT}"
    if isinstance(exc, AnswerTooLarge):
        return f"{what}: {exc}"
    if isinstance(exc, httpx.ConnectError):
        return strip_controls(f"{what}: {REFUSED} ({exc})")
    if isinstance(exc, httpx.HTTPStatusError):
        return f"{what}: HTTP {exc.response.status_code}"
    if isinstance(exc, (json.JSONDecodeError, UnicodeDecodeError)):
        return strip_controls(f"{what}: invalid JSON ({exc})")
    return strip_controls(f"{what}: {type(exc).__name__}: {exc}")
