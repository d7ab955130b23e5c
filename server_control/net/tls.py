"""One TLS context for every httpx client the process makes.

httpx builds a new SSL context for each client by default (the CA bundle loaded and parsed
again): 0.7 MB and 16 ms apiece here, so a 1000-member `fleet status` spent ~770 MB and
most of 19 s building contexts its loopback http:// members never used. Every client takes
``shared()`` instead: built once on first use (thread-safe), with httpx's own defaults
(``httpx.create_ssl_context()``: certifi's bundle, hostname checks), so an https:// member
is verified exactly as before.
"""

from __future__ import annotations

import ssl
import threading

from server_control.net.lean_httpx import httpx

_lock = threading.Lock()
_context: ssl.SSLContext | None = None


def shared() -> ssl.SSLContext:
    global _context
    with _lock:
        if _context is None:
            _context = httpx.create_ssl_context()
        return _context
