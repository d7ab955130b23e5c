"""The ui/demo/attach commands: argument errors are clear (exit 2, the problem named);
the demo chooses its port and state dir so it never collides with a real run."""

from __future__ import annotations

import socket

import pytest

from console.cli import main
from console.cli.demo_target import demo_profile, demo_state_dir, demo_target


def test_bad_profile_names_the_file(tmp_path, capsys):
    bad = tmp_path / "broken.toml"
    bad.write_text("[server\n")
    assert main(["--profile", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "broken.toml" in err and "TOML" in err


def test_missing_profile(tmp_path, capsys):
    assert main(["ui", "--profile", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


def test_attach_errors(capsys, monkeypatch):
    assert main(["attach", "localhost:30000"]) == 2
    assert "http://" in capsys.readouterr().err
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    assert main(["attach", "http://127.0.0.1:1", "--api-key-env", "NO_SUCH_KEY_VAR"]) == 2
    assert "NO_SUCH_KEY_VAR" in capsys.readouterr().err
    for bad in ("http://127.0.0.1:99999", "http://127.0.0.1:0", "http://"):  # 99999 was accepted
        assert main(["attach", bad]) == 2
        assert "URL " in capsys.readouterr().err


def test_attach_help_is_its_own(capsys):
    """`attach --help` showed the demo's text."""
    with pytest.raises(SystemExit):
        main(["attach", "--help"])
    out = capsys.readouterr().out
    assert "someone else started" in out and "crosses the threshold" not in out


def test_demo_argument_errors(capsys):
    with pytest.raises(SystemExit) as refused:  # argparse refuses it: exit 2, the flag named
        main(["demo", "--time-scale", "0"])
    assert refused.value.code == 2
    assert "--time-scale" in capsys.readouterr().err
    assert main(["demo", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_demo_state_dir_and_busy_port(tmp_path, monkeypatch):
    from server_control.config import assets
    from server_control.host.ports import free_port

    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    state = demo_state_dir()
    assert state == tmp_path / "state" / "demo"
    # the shipped profile with a free port in place of 30000 (other work may hold 30000)
    shipped = assets.profile_path("demo").read_text()
    assert "\nport = 30000\n" in shipped
    own = tmp_path / "demo.toml"
    own.write_text(shipped.replace("\nport = 30000\n", f"\nport = {free_port('127.0.0.1')}\n"))
    shipped_path = assets.profile_path
    monkeypatch.setattr(assets, "profile_path", lambda name: own if name == "demo" else shipped_path(name))
    profile = demo_profile(state)
    with socket.socket() as s:  # hold the port the demo would take
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", profile.port))
        s.listen(1)
        moved = demo_target(state)
        assert moved.profile.port != profile.port
        assert moved.note == f"port {profile.port} is busy: the demo simulator runs on port {moved.profile.port}"
    assert demo_target(state).note == "" and demo_target(state, port=31234).note == ""
    assert demo_profile(state, port=31234, time_scale=5).sim["time_scale"] == 5
    assert demo_profile(state, port=31234).port == 31234


async def test_attach_with_a_missing_log_says_so_on_screen(tmp_path, fake):
    from console.app import SpecConsoleApp
    from console.cli.ui import log_notice

    missing = tmp_path / "nope.log"
    notice = log_notice(str(missing))
    assert str(missing) in notice and "does not exist" in notice
    assert log_notice(None) == "" and log_notice(__file__) == ""
    app = SpecConsoleApp(fake, notice=notice)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert notice in [n.message for n in app._notifications]
