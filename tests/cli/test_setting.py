"""`specconsole setting` off the happy path: nothing answering, an unknown NAME, a bad VALUE
(text and --json). The happy path and the table behind it: tests/test_runtime_settings_table.py."""

from __future__ import annotations

import json

from console.cli.main import main as cli_main
from server_control.host.ports import free_port


def test_nothing_answering_exits_5_and_says_how_to_choose_a_server(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert cli_main(["setting", "--url", url]) == 5
    out, err = capsys.readouterr()
    assert out.startswith(f"error: {url}/server_info: connection refused") and f"no answer from {url}" in err
    assert cli_main(["setting", "dwell", "--url", url, "--json"]) == 5
    assert "connection refused" in json.loads(capsys.readouterr().out)["error"]


def test_setting_a_value_with_nothing_answering_exits_5_with_the_change_as_json(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert cli_main(["setting", "hysteresis", "2", "--url", url, "--json"]) == 5
    change = json.loads(capsys.readouterr().out)
    assert change["state"] == "error" and change["key"] == "speculative_disable_hysteresis" and change["requested"] == 2


def test_an_unknown_name_or_a_bad_value_is_refused_before_anything_is_sent(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    assert cli_main(["setting", "speed", "3", "--url", url]) == 2
    assert "refused: no runtime setting 'speed' (one of: threshold, hysteresis, dwell, force, cold)" in capsys.readouterr().err
    assert cli_main(["setting", "dwell", "many", "--url", url, "--json"]) == 2
    assert "speculative_disable_min_dwell_steps must be an integer, got 'many'" in capsys.readouterr().err
    assert cli_main(["setting", "force", "sideways", "--url", url]) == 2
    assert "must be one of auto, speculative, target_only, got 'sideways'" in capsys.readouterr().err
