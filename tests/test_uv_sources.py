"""scripts/uv_sources.py: pip's configured sources as uv's arguments (scripts/test's install),
against pip's own ``pip config list`` where it can be (a PIP_CONFIG_FILE of the test's)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "uv_sources.py"


def _run(listing: str) -> list[str]:
    out = subprocess.run([sys.executable, str(SCRIPT)], input=listing, capture_output=True, text=True, timeout=30, check=True)
    return out.stdout.splitlines()


def test_every_source_pip_is_given_becomes_uvs_with_pips_best_match():
    listing = (
        "global.cert='/etc/ssl/certs/ca.crt'\n"
        "global.constraint='/etc/xdg/pip/constraints.txt'\n"
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'\n"
        "global.find-links='/opt/wheels'\n"
    )
    assert _run(listing) == [
        "--extra-index-url",
        "file:///opt/a/simple",
        "--extra-index-url",
        "file:///opt/b/simple",
        "--find-links",
        "/opt/wheels",
        "--constraint",
        "/etc/xdg/pip/constraints.txt",
        "--index-strategy",
        "unsafe-best-match",
        "SSL_CERT_FILE=/etc/ssl/certs/ca.crt",
    ]


def test_the_environment_beats_install_which_beats_global():
    listing = (
        "global.index-url='https://global.invalid/simple'\n"
        "install.index-url='https://install.invalid/simple'\n"
        "global.find-links='/opt/global'\n"
        "install.find-links='/opt/install'\n"
        ":env:.find-links='/opt/env'\n"
        "global.no-index='false'\n"
    )
    assert _run(listing) == [
        "--index-url",
        "https://install.invalid/simple",
        "--find-links",
        "/opt/env",
        "--index-strategy",
        "unsafe-best-match",
    ]


def test_no_index_is_kept_and_unreadable_lines_are_skipped():
    listing = "global.no-index='true'\nnot a setting\nglobal.find-links='unbalanced\n:env:.find-links='/opt/w'\n"
    assert _run(listing) == ["--no-index", "--find-links", "/opt/w", "--index-strategy", "unsafe-best-match"]


def test_nothing_configured_is_uvs_defaults_with_best_match():
    assert _run("") == ["--index-strategy", "unsafe-best-match"]


def test_it_reads_pips_own_listing(tmp_path):
    """pip's real ``config list`` of a config file of the test's (and no PIP_* variables)."""
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nfind-links = /opt/x /opt/y\nconstraint = /tmp/c.txt\n[install]\nindex-url = file:///opt/idx\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(conf), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, env=env, timeout=60, check=True
    ).stdout
    args = _run(listing)
    assert args[:2] == ["--index-url", "file:///opt/idx"], (listing, args)
    assert ["--find-links", "/opt/x", "--find-links", "/opt/y"] == [a for a in args if a in ("--find-links", "/opt/x", "/opt/y")]
    assert "/tmp/c.txt" in args
