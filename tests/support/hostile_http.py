"""A hostile HTTP server on 127.0.0.1 for the bounded-read tests (run as its own process):

    python tests/support/hostile_http.py --port P --mode endless|trickle|declared --lifetime S

endless:  200, chunked, a body that never ends, as fast as the socket takes it
trickle:  200, chunked, one byte every 50 ms forever (no read timeout ever fires)
declared: 200, ``Content-Length: 1500000000``, then bytes as fast as the socket takes them
Every path answers the same. It exits after ``--lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import argparse
import socket
import threading
import time


def _serve(conn: socket.socket, mode: str) -> None:
    try:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            got = conn.recv(4096)
            if not got:
                return
            data += got
        if mode == "declared":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1500000000\r\n\r\n")
            block = b"[" + b"1," * 32767
            while True:
                conn.sendall(block)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        if mode == "endless":
            block = b"1," * 32768
            chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
            while True:
                conn.sendall(chunk)
        while True:  # trickle
            conn.sendall(b"1\r\n \r\n")
            time.sleep(0.05)
    except OSError:
        pass
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=("endless", "trickle", "declared"), required=True)
    ap.add_argument("--lifetime", type=float, default=60.0)
    args = ap.parse_args()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(16)
    threading.Timer(args.lifetime, lambda: __import__("os")._exit(0)).start()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve, args=(conn, args.mode), daemon=True).start()


if __name__ == "__main__":
    main()
