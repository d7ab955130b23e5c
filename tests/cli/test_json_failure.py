"""With ``--json`` every failing command says why on stdout as JSON too (a script reading
stdout never gets nothing): bad values, bad profiles, argparse's usage errors; a command that
wrote its own JSON is left alone; without ``--json`` stdout stays empty."""

from __future__ import annotations

import json

import pytest

from console.cli.main import main
from tests.support.cli import cli

FAILING = [
    (["threshold", "abc", "--json"], 2, "must be an integer, got 'abc'"),
    (["threshold", "5", "--json", "--profile", "/nonexistent/p.toml"], 2, "/nonexistent/p.toml: cannot read profile"),
    (["setting", "bogus", "1", "--json", "--demo"], 2, "no runtime setting 'bogus'"),
    (["status", "--json", "--profile", "/etc/hostname"], 2, "/etc/hostname"),
    (["journal", "--json", "--profile", "/nonexistent/p.toml"], 2, "cannot read profile"),
    (["logs", "--json", "--profile", "/nonexistent/p.toml"], 2, "cannot read profile"),
    (["verify", "--json", "--frobnicate"], 2, "unrecognized arguments: --frobnicate"),
    (["fleet", "status", "--json", "--bogus"], 2, "unrecognized arguments: --bogus"),
]


def _call(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(("argv", "code", "words"), FAILING, ids=[" ".join(a[:2]) for a, _, _ in FAILING])
def test_a_failure_with_json_says_why_on_stdout(argv, code, words, state_dir, capsys):
    assert _call(argv) == code
    out, err = capsys.readouterr()
    doc = json.loads(out)  # exactly one JSON document
    assert doc["exit"] == code and words in doc["error"], doc
    assert words in err  # stderr as without --json


@pytest.mark.parametrize(("argv", "code", "words"), FAILING[:2] + FAILING[-2:], ids=["threshold", "profile", "verify", "fleet"])
def test_without_json_stdout_stays_empty(argv, code, words, state_dir, capsys):
    assert _call([a for a in argv if a != "--json"]) == code
    out, err = capsys.readouterr()
    assert out == "" and words in err


def test_a_command_that_wrote_its_own_json_is_left_alone(state_dir, capsys):
    """`status --demo --json` with no demo run prints its own ``{"error", "running": false}``."""
    assert _call(["status", "--demo", "--json"]) == 1
    out, _ = capsys.readouterr()
    assert json.loads(out)["running"] is False and "exit" not in json.loads(out)


def test_help_and_success_print_no_error(state_dir, capsys):
    assert _call(["threshold", "--help", "--json"]) == 0
    out, _ = capsys.readouterr()
    assert '"error"' not in out and "usage:" in out


def test_the_real_command_line(state_dir):
    r = cli("threshold", "abc", "--json")
    assert r.returncode == 2 and json.loads(r.stdout) == {
        "error": "specconsole: refused: speculative_disable_batch_threshold must be an integer, got 'abc'",
        "exit": 2,
    }, (r.stdout, r.stderr)
