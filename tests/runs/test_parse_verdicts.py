"""SGLang's parser's yes is kept (server_control/config/parse_verdicts.py): the same
interpreter, SGLang, patch and command line are not asked twice; anything that changes what
the parser would see asks again; refusals are never kept; the file holds no command line.

The interpreter here finds a stand-in ``sglang`` package (first on its path) whose
``server_args.py`` appends a line to a count file each time it is imported, so the tests
count the real asks (``python -m server_control.sglang_patch.parse_check`` in a fresh
interpreter, as a launch runs it). Negative control: with the lookup made to miss, the
"not asked twice" test fails (two asks)."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from server_control.config import parse_verdicts
from server_control.config.argv_check import check_argv
from server_control.config.profile import load_profile
from tests.support.cli import cli

REPO = Path(__file__).resolve().parents[2]

SERVER_ARGS = """\
import os
LAUNCH_FLAGS = os.environ.get("FAKE_SGLANG_FLAGS", "").split()
with open(os.environ["FAKE_SGLANG_COUNT"], "a") as f:
    f.write("asked\\n")


class ServerArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", required=True)
        parser.add_argument("--port", type=int)
        parser.add_argument("--api-key")
        for flag in LAUNCH_FLAGS:
            parser.add_argument(flag)
"""


def _fake_sglang(root: Path) -> Path:
    pkg = root / "sglang"
    (pkg / "srt").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "srt" / "__init__.py").write_text("")
    (pkg / "srt" / "server_args.py").write_text(SERVER_ARGS)
    dist = root / "sglang-0.5.23.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    (dist / "RECORD").write_text("sglang/__init__.py,,\n")
    return root


@pytest.fixture
def world(tmp_path, monkeypatch):
    """(profile, spec maker, count file, cache dir): a profile whose interpreter finds the stand-in."""
    site = _fake_sglang(tmp_path / "site")
    count = tmp_path / "asked"
    cache = tmp_path / "cache"
    monkeypatch.setenv(parse_verdicts.CACHE_DIR_ENV, str(cache))
    monkeypatch.delenv(parse_verdicts.SWITCH_ENV, raising=False)
    prof = tmp_path / "p.toml"
    prof.write_text(
        f'name = "p"\n[server]\nkind = "sglang"\npython = "{sys.executable}"\nmodel_path = "/m/target"\nport = 31999\n'
        'extra_args = []\n[speculative]\nalgorithm = "EAGLE3"\ndraft_model_path = "/m/draft"\n'
        f'[env]\nPYTHONPATH = "{site}:{REPO}"\nFAKE_SGLANG_COUNT = "{count}"\n'
    )

    def spec_of(argv_tail=()):
        profile = load_profile(prof)
        spec = profile.launch_spec(tmp_path / "state", preview=[])
        if argv_tail:
            object.__setattr__(spec, "argv", [*spec.argv, *argv_tail])
        return profile, spec

    return spec_of, count, cache, site


def _asks(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def _only_known_flags(spec):
    """The stand-in parser knows --model-path, --port and --api-key: keep those."""
    argv = list(spec.argv)
    head, tail = argv[:3], argv[3:]
    keep, i = [], 0
    while i < len(tail):
        if tail[i] in ("--model-path", "--port", "--api-key"):
            keep += tail[i : i + 2]
            i += 2
        else:
            i += 1
    object.__setattr__(spec, "argv", head + keep)
    return spec


def test_a_yes_is_kept_and_not_asked_twice(world):
    spec_of, count, cache, _ = world
    profile, spec = spec_of()
    spec = _only_known_flags(spec)
    first = check_argv(profile, spec)
    assert (first.refusal, first.skipped, first.kept_at) == (None, None, None)
    assert _asks(count) == 1
    second = check_argv(profile, spec)
    assert (second.refusal, second.skipped) == (None, None)
    assert second.kept_at is not None and abs(second.kept_at - time.time()) < 120
    assert _asks(count) == 1, "the kept yes was asked again"
    assert check_argv(profile, spec, kept=False).kept_at is None
    assert _asks(count) == 2


def test_what_the_parser_would_see_changing_asks_again(world, monkeypatch):
    spec_of, count, cache, site = world
    profile, spec = spec_of()
    spec = _only_known_flags(spec)
    check_argv(profile, spec)
    assert _asks(count) == 1
    other = _only_known_flags(spec_of()[1])
    object.__setattr__(other, "argv", [*other.argv, "--port", "31998"])
    assert check_argv(profile, other).kept_at is None  # another command line
    assert _asks(count) == 2
    server_args = site / "sglang" / "srt" / "server_args.py"
    server_args.write_text(server_args.read_text() + "\n")  # an edited server_args.py
    assert check_argv(profile, spec).kept_at is None
    assert _asks(count) == 3
    (site / "sglang-0.5.23.dist-info" / "RECORD").write_text("sglang/__init__.py,,\nsglang/x.py,,\n")  # a reinstall
    assert check_argv(profile, spec).kept_at is None
    assert _asks(count) == 4
    spec.env["SGLANG_SOMETHING"] = "1"
    assert check_argv(profile, spec).kept_at is None
    assert _asks(count) == 5
    assert check_argv(profile, spec).kept_at is not None
    assert _asks(count) == 5
    monkeypatch.setenv(parse_verdicts.SWITCH_ENV, "off")
    assert check_argv(profile, spec).kept_at is None
    assert _asks(count) == 6


def test_a_refusal_is_asked_every_time_and_the_file_holds_no_command_line(world):
    spec_of, count, cache, _ = world
    profile, spec = spec_of()
    spec = _only_known_flags(spec)
    object.__setattr__(spec, "argv", [*spec.argv, "--api-key", "sk-secret-123"])
    assert check_argv(profile, spec).ok
    bad = _only_known_flags(spec_of()[1])
    object.__setattr__(bad, "argv", [*bad.argv, "--api-key", "sk-secret-123", "--no-such-flag"])
    for n in (2, 3):
        res = check_argv(profile, bad)
        assert res.refusal and "--no-such-flag" in res.refusal and res.kept_at is None
        assert _asks(count) == n
    text = (cache / parse_verdicts.FILE_NAME).read_text()
    assert "sk-secret" not in text and "--port" not in text and "model" not in text
    assert list(json.loads(text)["takes_it"]) and len(json.loads(text)["takes_it"]) == 1
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / parse_verdicts.FILE_NAME).st_mode) == 0o600


def test_no_sglang_there_keeps_nothing(tmp_path):
    bare = tmp_path / "bare-python"  # no site-packages: no SGLang, no patch
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    assert parse_verdicts.read_stamp(str(bare), None, tmp_path) is None
    assert parse_verdicts.read_stamp(sys.executable, None, tmp_path) is not None  # the control: this one has both
    assert parse_verdicts.read_stamp(str(tmp_path / "no-python"), None, tmp_path) is None


def test_old_damaged_and_unwritable_caches_are_misses(tmp_path):
    d = tmp_path / "c"
    now = 1_000_000_000.0
    assert parse_verdicts.keep("k1", now=now, directory=d)
    assert parse_verdicts.lookup("k1", now=now + 10, directory=d).at == now
    assert parse_verdicts.lookup("k1", now=now + parse_verdicts.MAX_AGE_S + 1, directory=d) is None
    assert parse_verdicts.lookup("k2", now=now, directory=d) is None
    (d / parse_verdicts.FILE_NAME).write_text('{"takes_it": {"k1": "yesterday", "k3": true}')  # damaged
    assert parse_verdicts.lookup("k1", now=now, directory=d) is None
    (d / parse_verdicts.FILE_NAME).write_text('{"takes_it": {"k1": "x", "k3": true, "k4": 5.0}}')
    assert (
        parse_verdicts.lookup("k3", now=5.0, directory=d) is None and parse_verdicts.lookup("k4", now=5.0, directory=d).at == 5.0
    )
    assert parse_verdicts.keep("k5", now=now, directory=d)  # a damaged entry does not stop a keep
    for i in range(parse_verdicts.MAX_ENTRIES + 10):
        parse_verdicts.keep(f"n{i}", now=now + i, directory=d)
    kept = json.loads((d / parse_verdicts.FILE_NAME).read_text())["takes_it"]
    assert len(kept) == parse_verdicts.MAX_ENTRIES and "n0" not in kept and f"n{parse_verdicts.MAX_ENTRIES + 9}" in kept
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    assert parse_verdicts.keep("k", now=now, directory=loose) is False  # others could write there
    (loose / parse_verdicts.FILE_NAME).write_text(json.dumps({"takes_it": {"planted": now}}))
    assert parse_verdicts.lookup("planted", now=now, directory=loose) is None  # nor is a yes read from there
    fifo = tmp_path / "fifo"
    fifo.mkdir(mode=0o700)
    os.mkfifo(fifo / parse_verdicts.FILE_NAME)  # never hangs the reader
    assert parse_verdicts.lookup("k", now=now, directory=fifo) is None
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # the cache directory cannot be made under a file (root writes anywhere else)
    assert parse_verdicts.keep("k", now=now, directory=blocked / "cache") is False
    assert parse_verdicts.lookup("k", now=now, directory=blocked / "cache") is None


def test_the_dry_run_says_when_its_verdict_is_a_kept_one(world, tmp_path, monkeypatch):
    """``launch --dry-run`` (the profile's own command line, every flag the launcher adds):
    asked the first time, kept the second, as text and as JSON."""
    spec_of, count, cache, _ = world
    profile, spec = spec_of()
    flags = " ".join(a for a in spec.argv[3:] if a.startswith("--") and a not in ("--model-path", "--port", "--api-key"))
    text = profile.path.read_text().replace("[env]\n", f'[env]\nFAKE_SGLANG_FLAGS = "{flags}"\n')
    profile.path.write_text(text)
    state = tmp_path / "state"
    first = cli("launch", "--dry-run", "--profile", str(profile.path), "--state-dir", str(state), "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["parsed_by_sglang"] is True
    assert json.loads(first.stdout)["parsed_verdict_kept_at"] is None
    assert _asks(count) == 1
    again = cli("launch", "--dry-run", "--profile", str(profile.path), "--state-dir", str(state), "--json")
    kept_at = json.loads(again.stdout)["parsed_verdict_kept_at"]
    assert kept_at and kept_at.endswith("+00:00") and json.loads(again.stdout)["parsed_by_sglang"] is True
    said = cli("launch", "--dry-run", "--profile", str(profile.path), "--state-dir", str(state))
    assert f"# SGLang's parser: takes it (kept: it took the same command line with this SGLang at {kept_at[:16]}" in said.stdout
    assert _asks(count) == 1
