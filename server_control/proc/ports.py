"""Free TCP ports on the loopback (or a given) interface."""
from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it; a race with another binder
    remains possible, so callers that start a server still handle 'address in use')."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port
