"""Command line: launch_server flags, sim flags, bad values, busy port."""

import os
import signal
import socket
import subprocess
import sys

import pytest

from server_control.protocol import sim_flags
from server_control.sim import args as simargs
from tests.support.sim import REPO_ROOT


def parse(*argv):
    return simargs.parse_args(["--model-path", "m", *argv])


def test_profile_flags_and_aliases_are_understood():
    a, unknown = parse(
        "--tensor-parallel-size",
        "2",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-draft-model",
        "d",
        "--speculative-disable-batch-threshold",
        "5",
        "--speculative-disable-hysteresis",
        "2",
        "--speculative-disable-min-dwell-steps",
        "3",
        "--speculative-disable-force-mode",
        "target-only",
        "--enable-metrics",
        "--decode-log-interval",
        "10",
        "--log-level",
        "warning",
    )
    assert unknown == []
    assert (a.tp_size, a.speculative_draft_model_path, a.speculative_disable_batch_threshold) == (2, "d", 5)
    assert (a.speculative_disable_hysteresis, a.speculative_disable_min_dwell_steps) == (2, 3)
    assert a.speculative_disable_force_mode == "target_only"
    assert (a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens) == (3, 1, 4)
    assert simargs.parse_args(["--model", "x"])[0].model_path == "x"


def test_unknown_flags_are_returned_not_fatal():
    _a, unknown = parse("--enable-torch-compile", "--cuda-graph-max-bs-decode", "16")
    assert unknown == ["--enable-torch-compile", "--cuda-graph-max-bs-decode", "16"]


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--speculative-disable-batch-threshold", "-1"], "--speculative-disable-batch-threshold"),
        (["--speculative-disable-batch-threshold", "five"], "--speculative-disable-batch-threshold"),
        (["--tp-size", "0"], "--tp-size"),
        (["--port", "70000"], "--port"),
        (["--sim-traffic", "storm"], "--sim-traffic"),
        (["--sim-traffic", "steady:0"], "--sim-traffic"),
        (["--sim-time-scale", "0"], "--sim-time-scale"),
        (["--sim-http-5xx-rate", "2"], "--sim-http-5xx-rate"),
        (["--speculative-disable-force-mode", "sometimes"], "--speculative-disable-force-mode"),
    ],
)
def test_invalid_values_exit_2_naming_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2
    assert flag in capsys.readouterr().err


def test_traffic_patterns_parse():
    assert sim_flags.parse_traffic("steady:8") == sim_flags.Traffic("steady", 8)
    assert sim_flags.parse_traffic("wave:12:30") == sim_flags.Traffic("wave", 12, 30.0)
    assert sim_flags.parse_traffic("ramp") == sim_flags.Traffic("ramp", 0, 60.0)


def test_secrets_are_not_printed_in_server_args():
    a, _ = parse("--api-key", "sekrit", "--speculative-disable-batch-threshold", "5")
    text = simargs.server_args_repr(a)
    assert "sekrit" not in text and "speculative_disable_batch_threshold=5" in text
    assert simargs.flat_server_args(a)["api_key"] == "<redacted>"


def run_sim(*argv, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "server_control.sim", *argv], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_real_process_invalid_value_exits_2():
    r = run_sim("--model-path", "m", "--speculative-disable-batch-threshold", "-3")
    assert r.returncode == 2
    assert "--speculative-disable-batch-threshold" in r.stderr and "-3" in r.stderr


def test_busy_port_exits_non_zero_naming_the_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_sim("--model-path", "m", "--host", "127.0.0.1", "--port", str(port), "--sim-max-lifetime", "20")
    assert r.returncode != 0
    assert f"port {port}" in r.stderr and "in use" in r.stderr


def test_port_taken_while_loading_exits_non_zero_naming_the_port():
    """Two servers started together on one port: both bind (SO_REUSEADDR, nobody listening
    yet); the one that gets to listen second must fail clearly, not exit 0."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "server_control.sim",
                "--model-path",
                "m",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--sim-load-time",
                "1",
                "--sim-max-lifetime",
                "30",
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            head = []
            for line in p.stderr:  # logged after the simulator bound its socket
                head.append(line)
                if "server_args=" in line:
                    break
            s.listen()
            _, err = p.communicate(timeout=60)
            err = "".join(head) + err
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert p.returncode == 1
    assert f"port {port}" in err and "in use" in err
