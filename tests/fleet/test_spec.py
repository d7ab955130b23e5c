"""The fleet file: valid files load into frozen specs; every problem names file, member, key."""

from __future__ import annotations

import dataclasses

import pytest

from server_control.config.assets import assets_dir
from server_control.fleet.spec import LOCAL, SSH, URL, FleetError, load_fleet, parse_fleet
from tests.fleet.conftest import write_profile


def _write(tmp_path, text: str):
    path = tmp_path / "f.toml"
    path.write_text(text)
    return path


def test_shipped_fleets_load():
    example = load_fleet(assets_dir() / "fleets" / "example.toml")
    assert [m.kind for m in example.members] == [LOCAL, SSH, URL]
    node2 = example.member("node2")
    assert node2.remote_argv("status", "--json") == [
        "env",
        "SPECCONSOLE_STATE_DIR=/var/lib/specconsole",
        "specconsole",
        "status",
        "--json",
    ]
    assert example.gateway is not None and example.gateway.url == "http://127.0.0.1:30100"
    demo = load_fleet("demo")  # a shipped fleet by name
    assert len(demo.members) == 4 and all(m.kind == LOCAL for m in demo.members)
    assert len({m.profile.sim["traffic"] for m in demo.members}) == 4  # different traffic each


def test_members_and_defaults(tmp_path):
    prof = write_profile(tmp_path, "p1")
    spec = load_fleet(
        _write(
            tmp_path,
            f'''
[members.a]
profile = "{prof.name}"
[members.b]
host = "gpu-2"
profile = "eagle3-tp8"
[members.c]
url = "http://127.0.0.1:9/"
gateway = false
''',
        )
    )
    a, b, c = spec.members
    assert (a.kind, b.kind, c.kind) == (LOCAL, SSH, URL)
    assert a.profile is not None and a.profile.name == "p1" and a.profile_ref == str(prof.resolve())
    assert b.command == ("specconsole",) and b.where == "gpu-2" and b.profile is None
    assert c.url == "http://127.0.0.1:9" and not c.gateway and c.where == "127.0.0.1:9"
    assert spec.name == "f" and spec.gateway is None and spec.poll_interval_s == 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "x"
    with pytest.raises(KeyError, match="no member 'zz'"):
        spec.member("zz")


@pytest.mark.parametrize(
    "body, expected",
    [
        ('[members.a]\nurl = "http://x:1"\nprofile = "demo"', r"\[members.a\] profile: give exactly one of"),
        ('[members.a]\nurl = "ftp://x"', r"\[members.a\] url: must be an http:// or https:// URL"),
        ('[members.a]\nprofile = "demo"\nportt = 3', r"\[members.a\] portt: unknown key"),
        ('[members.a]\nprofile = "demo"\nssh_options = ["-p", "2"]', r"\[members.a\] ssh_options: only for remote"),
        ('[members.a]\nurl = "http://x:1"\nhost = "h"', r"\[members.a\] host: a url member"),
        ('[members.a]\nhost = "h"\nprofile = "p"\ncommand = []', r"\[members.a\] command: must not be empty"),
        ('[members.a]\nhost = "-oProxyCommand=x"\nprofile = "p"', r"\[members.a\] host: must not start with '-'"),
        ('[members.a]\nhost = "h"\nprofile = "p"\nenv = {"1BAD" = "x"}', r"\[members.a\] env: '1BAD'"),
        ('[members.a]\nurl = "http://x:1"\napi_key_env = "my key"', r"\[members.a\] api_key_env: must be the NAME"),
        ('[members.a]\nprofile = "demo"\ngateway = "yes"', r"\[members.a\] gateway: expected true or false"),
        ('[members."a b"]\nurl = "http://x:1"', r"\[members.a b\]: member names are"),
        ('name = "x"', r"members: at least one member"),
        ('[members.a]\nurl = "http://x:1"\n[gateway]\npolicy = "fastest"', r"\[gateway\] policy: must be one of"),
        ('[members.a]\nurl = "http://x:1"\n[gateway]\nport = 0', r"\[gateway\] port: must be 1..65535"),
        ('poll_interval_s = 0\n[members.a]\nurl = "http://x:1"', r"poll_interval_s: must be >= 0.05"),
        ('colour = 1\n[members.a]\nurl = "http://x:1"', r"colour: unknown key"),
    ],
)
def test_bad_member_names_file_member_and_key(tmp_path, body, expected):
    path = _write(tmp_path, body)
    with pytest.raises(FleetError, match=expected) as err:
        load_fleet(path)
    assert str(err.value).startswith(f"{path}: ")


def test_a_bad_local_profile_is_quoted_under_its_member(tmp_path):
    write_profile(tmp_path, "bad", extra="", port=70000)
    path = _write(tmp_path, '[members.r1]\nprofile = "bad.toml"\n')
    with pytest.raises(FleetError) as err:
        load_fleet(path)
    text = str(err.value)
    assert text.startswith(f"{path}: [members.r1] profile: ") and "bad.toml: [server] port: must be 1..65535" in text


def test_all_problems_reported_together_and_port_clashes(tmp_path):
    p1 = write_profile(tmp_path, "p1", port=31001)
    p2 = write_profile(tmp_path, "p2", port=31001)
    path = _write(
        tmp_path,
        f'''
[gateway]
port = 31001
[members.a]
profile = "{p1}"
[members.b]
profile = "{p2}"
[members.c]
url = "nope"
''',
    )
    with pytest.raises(FleetError) as err:
        load_fleet(path)
    text = str(err.value)
    assert "3 problems" in text or "4 problems" in text
    assert "[members.c] url: must be an http" in text
    assert "[members.b] profile: port 31001 is also the port of member a" in text
    assert "[gateway] port: 31001 is the port of member a" in text


def test_unreadable_and_invalid_toml(tmp_path):
    with pytest.raises(FleetError, match="cannot read fleet file"):
        load_fleet(tmp_path / "missing.toml")
    with pytest.raises(FleetError, match="invalid TOML"):
        load_fleet(_write(tmp_path, "[members.a\n"))


def test_parse_without_a_file_names_the_fleet():
    with pytest.raises(FleetError, match=r"^<fleet>: members: at least one"):
        parse_fleet({})
