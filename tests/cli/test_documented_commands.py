"""Issue 35 item 2: every command the README and docs show is a command the parser takes,
with options it knows, and is run in CI: here against a real demo simulator and then with
nothing running, as text and as `--json` (no traceback, the exit codes the docs give,
JSON that parses), or, for what needs a terminal or a long-running process, by the test
named in ``ELSEWHERE``. A command shape added to the docs with neither fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from server_control.host.ports import free_port
from tests.cli.documented import REPO, documented, known_options
from tests.support.cli import cli, exec_cli

ALL = documented()

# command path -> the test that runs it (a screen, a process that runs until stopped, a real SGLang)
ELSEWHERE = {
    ("ui",): "tests/console/test_hangup_tmux.py",
    ("demo",): "tests/console/test_exit_watchdog_tmux.py",
    ("attach",): "tests/cli/test_ui.py",
    ("supervise",): "tests/cli/test_supervision.py",
    ("sim",): "tests/sim/test_http.py",
    ("bench",): "tests/cli/test_bench.py",
    ("patch",): "tests/cli/test_patch.py",
    ("patch", "install"): "tests/cli/test_patch.py",
    ("patch", "status"): "tests/cli/test_patch.py",
    ("patch", "uninstall"): "tests/cli/test_patch.py",
    ("fleet",): "tests/console/fleet/test_fleet_quit.py",
    ("fleet", "launch"): "tests/cli/test_fleet.py",
    ("fleet", "stop"): "tests/cli/test_fleet.py",
    ("launch",): "tests/cli/test_runs.py",
}

# command path -> argument lists run here (after `--state-dir` of the demo); exit codes allowed
# with the demo running and with nothing running (docs: 5 nothing answered, 1 no run / failed,
# 3 pending)
HERE: dict[tuple[str, ...], tuple[list[list[str]], set[int], set[int]]] = {
    ("status",): ([["--demo"]], {0}, {0, 1, 5}),
    ("threshold",): ([["--demo"], ["6", "--demo"], ["--force", "auto", "--demo"], ["auto", "--demo"]], {0, 1}, {1, 5}),
    ("setting",): ([["--demo"], ["dwell", "--demo"], ["hysteresis", "2", "--demo"], ["force", "auto", "--demo"]], {0}, {1, 5}),
    ("verify",): ([["--demo"], ["--demo", "--explain"]], {0, 3}, {1, 5}),
    ("logs",): (
        [["--demo", "-n", "5"], ["--demo", "--grep", "threshold", "-n", "3"], ["--demo", "--parse", "-n", "5"]],
        {0},
        {0, 1},
    ),
    ("journal",): ([["--demo"]], {0}, {0}),
    ("advise",): ([["--demo", "--no-save"]], {0, 1}, {1, 5}),
    ("stop",): ([["--demo"]], {0}, {0}),
    ("fleet", "status"): ([["--demo"]], {0}, {0}),
    ("fleet", "threshold"): ([["--demo"]], {0, 1}, {0, 1}),
    ("fleet", "verify"): ([["--demo"]], {0, 1, 3}, {0, 1, 3}),
}


def test_the_docs_show_commands_at_all():
    assert len(ALL) > 50 and {d.path for d in ALL} >= {("status",), ("fleet", "status"), ("logs",)}


@pytest.mark.parametrize("doc", ALL, ids=lambda d: f"{d.file}:{d.line[:60]}")
def test_every_documented_option_is_one_the_command_takes(doc):
    unknown = [o for o in doc.options if o not in known_options(doc.path)]
    assert not unknown, f"{doc.file} shows `{doc.line}`: `specconsole {' '.join(doc.path)}` has no {unknown}"


def test_every_documented_command_is_run_here_or_by_a_named_test():
    missing = sorted({d.path for d in ALL} - set(HERE) - set(ELSEWHERE))
    assert not missing, f"documented but never run: {missing} (add it to HERE or ELSEWHERE)"
    for path, test in ELSEWHERE.items():
        text = (REPO / test).read_text()
        assert f'"{path[-1]}"' in text or f" {path[-1]} " in text or path == ("ui",), (path, test)


def _run(state: Path, path: tuple[str, ...], args: list[str], as_json: bool, fresh: bool):
    argv = [*path, *args, "--state-dir", str(state), *(["--json"] if as_json else [])]
    if path == ("stop",) and as_json:
        argv.remove("--json")  # no JSON form: said in its help
    return argv, (exec_cli if fresh else cli)(*argv, timeout=120)


def _check(argv, res, codes: set[int], as_json: bool) -> None:
    both = res.stdout + res.stderr
    assert "Traceback" not in both, (argv, both[-3000:])
    assert res.returncode in codes, (argv, res.returncode, both[-2000:])
    if as_json and res.stdout.strip() and "--json" in argv:  # what --json prints is JSON, also when it fails
        try:
            json.loads(res.stdout)
        except ValueError:  # or JSON lines (`logs --json`): every line one object
            for line in res.stdout.splitlines():
                assert isinstance(json.loads(line), dict), (argv, line)


def _sweep(state: Path, running: bool) -> None:
    for path, (runs, ok_running, ok_idle) in HERE.items():
        if path == ("stop",) and running:
            continue  # stopped last, below
        for args in runs:
            for as_json in (False, True):
                if as_json and "--json" not in known_options(path):
                    continue
                # with nothing running, each in a fresh interpreter (its imports, the entry
                # point: what a fork of the fork server cannot show); against the demo, forked
                argv, res = _run(state, path, args, as_json, fresh=not running)
                _check(argv, res, ok_running if running else ok_idle, as_json)


def test_documented_commands_with_nothing_running(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path))
    _sweep(tmp_path / "demo", running=False)


def test_documented_commands_against_the_demo(tmp_path, monkeypatch):
    state = tmp_path / "demo"
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path))
    res = cli("launch", "--demo", "--state-dir", str(state), "--wait", "60", "--port", str(free_port()))  # not 30000
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        _sweep(state, running=True)
    finally:
        res = cli("stop", "--demo", "--state-dir", str(state))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
