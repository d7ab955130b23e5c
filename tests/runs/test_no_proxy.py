"""No control-plane client of specconsole reads proxy settings from the environment: with
HTTP(S)_PROXY / ALL_PROXY pointing at a real listener, `launch --wait`, `threshold`,
`status`, `verify`, `stop` and `supervise` reach the server directly and the listener sees
nothing (it would see the API and admin keys). A negative control shows that an ordinary
httpx client honours the same environment and does reach the listener."""

from __future__ import annotations

import ast
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from server_control.host.ports import free_port
from tests.support.cli import read_until

REPO = Path(__file__).resolve().parents[2]
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


class ProxyListener:
    """A TCP listener on loopback that records what every connection sends, answers 502."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    self.received.append(conn.recv(65536))
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_no_command_sends_anything_to_an_environment_proxy(make_profile, groups, monkeypatch):
    proxy = ProxyListener()
    try:
        env = dict(os.environ, TEST_KEY="sk-proxy-test-key", TEST_ADMIN_KEY="sk-proxy-admin-key")
        for var in PROXY_VARS:
            env[var] = f"http://127.0.0.1:{proxy.port}"
        env.pop("NO_PROXY", None)
        env.pop("no_proxy", None)
        path = make_profile("px", tp=1)
        path.write_text(
            path.read_text().replace(
                'kind = "sim"\n', 'kind = "sim"\napi_key_env = "TEST_KEY"\nadmin_api_key_env = "TEST_ADMIN_KEY"\n'
            )
        )

        def run(*args):
            return subprocess.run(
                [sys.executable, "-m", "console", *args, "--profile", str(path)],
                capture_output=True,
                text=True,
                timeout=120,
                env=env,
            )

        launched = run("launch", "--wait", "60", "--json")
        assert launched.returncode == 0, launched.stderr
        groups.add(int(launched.stdout.split('"pgid": ')[1].split(",")[0]))
        assert run("threshold", "8").returncode == 0
        assert run("threshold").returncode == 0
        assert run("status").returncode == 0
        run("verify")
        sup = subprocess.Popen(
            [sys.executable, "-m", "console", "supervise", "--profile", str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        groups.add(sup.pid)
        read_until(sup, "px: ready")
        sup.send_signal(signal.SIGINT)
        sup.communicate(timeout=30)
        assert run("stop").returncode == 0
        assert proxy.received == [], proxy.received

        # negative control: the same environment does steer a default httpx client there
        with monkeypatch.context() as m:
            for var in PROXY_VARS:
                m.setenv(var, f"http://127.0.0.1:{proxy.port}")
            m.delenv("NO_PROXY", raising=False)
            m.delenv("no_proxy", raising=False)
            with httpx.Client() as plain:
                assert plain.get(f"http://127.0.0.1:{free_port()}/health").status_code == 502
        assert len(proxy.received) == 1 and b"/health" in proxy.received[0]
    finally:
        proxy.close()


HTTPX_CALLS = {"AsyncClient", "Client", "get", "post", "put", "delete", "request", "stream"}


def test_every_httpx_client_in_the_product_ignores_proxy_settings():
    offenders = []
    for root in ("server_control", "console", "benchmarks", "scripts"):
        for path in sorted((REPO / root).rglob("*.py")) if (REPO / root).is_dir() else []:
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "httpx"
                    and node.func.attr in HTTPX_CALLS
                ):
                    kw = {k.arg: k.value for k in node.keywords}
                    value = kw.get("trust_env")
                    if not (isinstance(value, ast.Constant) and value.value is False):
                        offenders.append(f"{path.relative_to(REPO)}:{node.lineno} httpx.{node.func.attr}")
    assert offenders == [], "httpx clients that read proxy settings:\n" + "\n".join(offenders)
