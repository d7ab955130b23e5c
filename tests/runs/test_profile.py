"""Profiles: shipped examples load, validation names the file and the key, the launch spec."""

from __future__ import annotations

import os
import shlex
import socket
import sys

import pytest

from server_control.config.assets import profile_path
from server_control.config.profile import MASK, ProfileError, find_profile, load_profile, parse_profile


def write(tmp_path, text: str, name: str = "p.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_demo_profile_is_sim_tp2_threshold5_wave(state_dir):
    p = load_profile(profile_path("demo"))
    assert (p.name, p.kind, p.server["tp_size"], p.dynamic["threshold"]) == ("demo", "sim", 2, 5)
    assert (p.host, p.port, p.sim["traffic"]) == ("127.0.0.1", 30000, "wave")
    spec = p.launch_spec(state_dir)
    assert spec.argv[:3] == (sys.executable, "-m", "server_control.sim")
    args = list(spec.argv)
    assert args[args.index("--sim-traffic") + 1] == "wave"
    assert args[args.index("--speculative-disable-batch-threshold") + 1] == "5"
    assert args[args.index("--tp-size") + 1] == "2"
    assert spec.log_path.parent == state_dir / "logs" / "demo"


def test_eagle3_profile_masks_the_api_key(state_dir, monkeypatch):
    monkeypatch.setenv("SGLANG_API_KEY", "s3cret-value")
    p = load_profile(profile_path("eagle3-tp8"))
    assert (p.kind, p.server["tp_size"], p.dynamic["threshold"], p.stop_grace_s) == ("sglang", 8, 5, 30.0)
    spec = p.launch_spec(state_dir)
    assert spec.argv[1:3] == ("-m", "server_control.sglang_patch.serve")
    # the server gets it through its environment, never on its command line (ps shows that)
    assert "s3cret-value" not in spec.argv and "--api-key" not in spec.argv
    assert spec.env["SPECCONSOLE_API_KEY"] == "s3cret-value"
    assert spec.masked_env_overrides()["SPECCONSOLE_API_KEY"] == MASK  # printing never shows it
    shown = spec.command_line()
    assert "s3cret-value" not in shown
    assert shlex.split(shown)[1:3] == ["-m", "server_control.sglang_patch.serve"]
    env = spec.masked_env_overrides()
    assert env["NCCL_IB_DISABLE"] == "1" and env["NCCL_DEBUG"] == "WARN" and "NCCL_P2P_LEVEL" in env
    assert spec.env["NCCL_P2P_LEVEL"] == env["NCCL_P2P_LEVEL"]
    assert spec.env["PYTHONPATH"].split(":")[0] == str(profile_path("demo").parents[2])
    for flag in ("--speculative-algorithm", "--speculative-draft-model-path", "--mem-fraction-static"):
        assert flag in spec.argv


def test_api_key_variable_unset_is_named(state_dir, monkeypatch):
    monkeypatch.delenv("SGLANG_API_KEY", raising=False)
    p = load_profile(profile_path("eagle3-tp8"))
    with pytest.raises(ProfileError, match=r"eagle3-tp8\.toml: \[server\] api_key_env: .*SGLANG_API_KEY"):
        p.launch_spec(state_dir)


@pytest.mark.parametrize(
    "text, where",
    [
        ("bogus = 1\n", r"bogus: unknown key"),
        ("[server]\nprot = 30000\n", r"\[server\] prot: unknown key"),
        ('[server]\nport = "30000"\n', r"\[server\] port: expected an integer"),
        ("[server]\nport = 70000\n", r"\[server\] port: must be 1\.\.65535"),
        ("[server]\ntp_size = 0\n", r"\[server\] tp_size: must be 1\.\.64"),
        ('[server]\nkind = "vllm"\n', r"\[server\] kind: must be one of sim, sglang"),
        ('[server]\nkind = "sglang"\n', r"\[server\] model_path: required"),
        ('[server]\nextra_args = "--foo"\n', r"\[server\] extra_args: expected a list of strings"),
        ('[server]\napi_key_env = "sk-live-123"\n', r"\[server\] api_key_env: must be the NAME"),
        ("[dynamic]\nthreshold = -1\n", r"\[dynamic\] threshold: .*>= 0"),
        ("[dynamic]\nthreshold = 2.5\n", r"\[dynamic\] threshold: expected an integer"),
        ("[restart]\nburst = 0\n", r"\[restart\] burst: must be >= 1"),
        ('[restart]\nenabled = "yes"\n', r"\[restart\] enabled: expected true or false"),
        ('[env]\nNCCL_DEBUG = ["x"]\n', r"\[env\] NCCL_DEBUG: expected a string or a number"),
        ("[sim]\nwarp = 9\n", r"\[sim\] warp: unknown key"),
        ('[sim]\ntraffic = "wav"\n', r"\[sim\] traffic: invalid value 'wav' for --sim-traffic: unknown traffic"),
        ('[sim]\nseed = "x"\n', r"\[sim\] seed: invalid value 'x' for --sim-seed"),
        ("[sim]\nseed = true\n", r"\[sim\] seed: --sim-seed takes a value"),
        ("[sim]\nmax_lifetime = -5\n", r"\[sim\] max_lifetime: invalid value -5"),
        ('[sim]\nhealth_fail_mode = "hung"\n', r"\[sim\] health_fail_mode: must be one of 503, hang"),
        ("[health]\ninterval_s = 1e-300\n", r"\[health\] interval_s: must be >= 0\.05 s"),
        ("[health]\ntimeout_s = 0.01\n", r"\[health\] timeout_s: must be >= 0\.05 s"),
        ("[health]\nstart_timeout_s = -1\n", r"\[health\] start_timeout_s: must be 0 \(never\) or 0\.05\.\.604800 s"),
        ("[health]\nstart_timeout_s = 1e9\n", r"\[health\] start_timeout_s: must be 0 \(never\) or"),
        ('[health]\nstart_timeout_s = "30m"\n', r"\[health\] start_timeout_s: expected a number"),
        (
            '[server]\nextra_args = ["--api-key", "sk-live-123"]\n',
            r"\[server\] extra_args\[0\]: --api-key would put a key .*api_key_env",
        ),
        ('[server]\nextra_args = ["--admin-api-key=sk-1"]\n', r"\[server\] extra_args\[0\]: --admin-api-key .*admin_api_key_env"),
        ('[server]\nextra_args = ["--api-ke", "sk-1"]\n', r"extra_args\[0\]: --api-key would put"),
        ("server = 3\n", r"server: must be a table"),
        ('name = "a b"\n', r"name: must be letters"),
    ],
)
def test_validation_names_file_and_key(tmp_path, text, where):
    path = write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(path) in str(info.value)
    assert __import__("re").search(where, str(info.value)), str(info.value)


def test_valid_sim_values_pass(tmp_path):
    path = write(tmp_path, '[sim]\ntraffic = "steady:3"\nseed = 4\nhealth_fail_mode = 503\nmax_lifetime = 60\n')
    assert load_profile(path).sim == {"traffic": "steady:3", "seed": 4, "health_fail_mode": 503, "max_lifetime": 60}


def test_all_problems_reported_together(tmp_path):
    path = write(tmp_path, '[server]\nport = 0\nhost = ""\n[speculative]\nnum_steps = "3"\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    msg = str(info.value)
    assert "3 problems" in msg and "[server] port" in msg and "[server] host" in msg
    assert "[speculative] num_steps" in msg
    assert set(info.value.keys) == {"[server] port", "[server] host", "[speculative] num_steps"}


def test_unreadable_and_invalid_toml_name_the_file(tmp_path):
    with pytest.raises(ProfileError, match="missing.toml: cannot read"):
        load_profile(tmp_path / "missing.toml")
    path = write(tmp_path, "[server\nport = 1\n")
    with pytest.raises(ProfileError, match=r"p\.toml: invalid TOML"):
        load_profile(path)
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b'name = "\xff"\n')
    with pytest.raises(ProfileError, match="bin.toml: not UTF-8"):
        load_profile(bad)


def test_busy_port_is_named(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = load_profile(write(tmp_path, f"[server]\nport = {port}\n"))
        with pytest.raises(ProfileError, match=rf"\[server\] port: 127\.0\.0\.1:{port} is busy"):
            p.check_port()
    p.check_port()  # free again: no error


def test_sim_keys_become_flags_and_env_numbers_become_strings(tmp_path, state_dir):
    p = load_profile(
        write(
            tmp_path,
            '[sim]\ncrash_after = 1.5\ntraffic = "steady:8"\n[env]\nNCCL_IB_DISABLE = 1\n[server]\nextra_args = ["--x", "y z"]\n',
        )
    )
    spec = p.launch_spec(state_dir)
    tail = list(spec.argv[-6:])
    assert tail == ["--sim-crash-after", "1.5", "--sim-traffic", "steady:8", "--x", "y z"]
    assert spec.env_overrides["NCCL_IB_DISABLE"] == "1"
    assert shlex.split(spec.command_line()) == list(spec.argv)


def test_defaults_and_grace_by_kind(tmp_path):
    sim = parse_profile({}, tmp_path / "x.toml", "x")
    assert (sim.name, sim.kind, sim.stop_grace_s, sim.restart["burst"]) == ("x", "sim", 5.0, 5)
    sg = parse_profile({"server": {"kind": "sglang", "model_path": "m"}, "speculative": {"algorithm": ""}}, None, "y")
    assert sg.stop_grace_s == 30.0
    assert "--speculative-algorithm" not in sg.server_args()


def test_find_profile(monkeypatch, tmp_path):
    monkeypatch.delenv("SPECCONSOLE_PROFILE", raising=False)
    assert find_profile(None) == profile_path("demo")
    assert find_profile("eagle3-tp8") == profile_path("eagle3-tp8")
    own = write(tmp_path, "", "mine.toml")
    monkeypatch.setenv("SPECCONSOLE_PROFILE", str(own))
    assert find_profile(None) == own
    assert find_profile(str(tmp_path / "nope.toml")) == tmp_path / "nope.toml"


def test_log_paths_are_numbered_per_start(tmp_path, state_dir):
    p = load_profile(write(tmp_path, 'name = "n"\n'))
    first = p.next_log_path(state_dir)
    assert first.name.endswith("-1.log")
    first.parent.mkdir(parents=True)
    first.write_text("")
    assert p.next_log_path(state_dir).name.endswith("-2.log")


def test_dry_run_shows_the_command_even_with_an_unset_key_variable(tmp_path, monkeypatch):
    """--dry-run prints the whole command with a visible placeholder and a warning naming
    the file and key; a real launch spec still refuses."""
    import json
    import subprocess
    import sys

    from server_control.config.assets import profile_path
    from server_control.config.profile import ProfileError, load_profile
    from tests.support import parserless

    monkeypatch.delenv("SGLANG_API_KEY", raising=False)
    with pytest.raises(ProfileError, match="api_key_env"):
        load_profile(profile_path("eagle3-tp8")).launch_spec(tmp_path)
    path = parserless.tp8_without_parser(tmp_path)  # the shipped profile; no SGLang import (tests/support/parserless.py)
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_API_KEY"}
    env["SPECCONSOLE_STATE_DIR"] = str(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "console", "launch", "--profile", str(path), "--dry-run", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["env"]["SPECCONSOLE_API_KEY"] == "<$SGLANG_API_KEY unset>"
    # the unset key, and the parser this interpreter cannot reach (SGLang's tier asks it)
    key, parser = doc["problems"]
    assert "[server] api_key_env" in key and parserless.UNREACHABLE in parser, doc["problems"]
    assert "a real launch would fail" in out.stderr and str(path) in out.stderr


def test_a_key_in_extra_args_is_refused_without_repeating_it(tmp_path):
    path = write(tmp_path, '[server]\nextra_args = ["--port", "1234", "--api-key", "sk-live-secret"]\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert "extra_args[2]: --api-key" in str(info.value) and "sk-live-secret" not in str(info.value)


@pytest.mark.parametrize(
    "given, rest",
    [(None, []), ("", []), ("{root}", []), ("/elsewhere", ["/elsewhere"]), ("/elsewhere{sep}{root}", ["/elsewhere"])],
)
def test_the_server_path_names_the_package_root_once_and_first(state_dir, monkeypatch, given, rest):
    """A PYTHONPATH that already held the package root (as the tests' and many venvs' do)
    was shown and passed with it twice (``PYTHONPATH=/repo:/repo`` in a dry run)."""
    from pathlib import Path

    import server_control.config.profile as profile_module

    root = str(Path(profile_module.__file__).resolve().parents[2])
    if given is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", given.format(root=root, sep=os.pathsep))
    spec = load_profile(profile_path("demo")).launch_spec(state_dir)
    assert spec.env["PYTHONPATH"].split(os.pathsep) == [root, *rest]


def test_the_start_timeout_defaults_to_half_an_hour_and_zero_turns_it_off(tmp_path):
    assert load_profile(write(tmp_path, "")).health["start_timeout_s"] == 1800.0
    assert load_profile(write(tmp_path, "[health]\nstart_timeout_s = 0\n")).health["start_timeout_s"] == 0.0
