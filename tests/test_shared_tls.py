"""Every httpx client of ours shares one TLS context (server_control/net/tls.py): a client
built with httpx's default builds its own (0.7 MB, 16 ms), and a 1000-member `fleet status`
spent 750 MB and 18 s on them (benchmarks/fleet_status_scale.py). Checked on the source:
every ``httpx.Client(...)`` / ``httpx.AsyncClient(...)`` in server_control/ and console/
passes ``verify=tls.shared()``; and the shared context verifies as httpx's default does."""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

import httpx

from server_control.net import tls

ROOT = Path(__file__).resolve().parents[1]


def _clients_without_the_shared_context() -> list[str]:
    bad = []
    for base in ("server_control", "console"):
        for path in sorted((ROOT / base).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                f = node.func
                if not (isinstance(f.value, ast.Name) and f.value.id == "httpx" and f.attr in ("Client", "AsyncClient")):
                    continue
                verify = next((k.value for k in node.keywords if k.arg == "verify"), None)
                if not (isinstance(verify, ast.Call) and ast.unparse(verify.func) == "tls.shared"):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return bad


def test_every_client_passes_the_shared_context():
    assert _clients_without_the_shared_context() == []


def test_the_shared_context_is_one_and_verifies_like_httpxs_default():
    a, b = tls.shared(), tls.shared()
    assert a is b
    default = httpx.create_ssl_context()
    assert a.verify_mode == default.verify_mode == ssl.CERT_REQUIRED
    assert a.check_hostname is True and default.check_hostname is True
    assert len(a.get_ca_certs()) == len(default.get_ca_certs()) > 0
