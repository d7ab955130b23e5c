"""The switch's runtime settings are defined once (``server_control/protocol/runtime_settings.py``):
one made-up row added to the table (tests/support/fifth_setting.py) shows up, with nothing
else changed, on the simulator (its flag, every rank's switch, internal_states), in
`specconsole setting` (read, set, refused), in the journal, on the console's status bar,
and in the SGLang patch (the server argument, SGLang's own parser, the controller's
allowlist, the switch and the published state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from console.cli.main import main as cli_main
from console.widgets.status_bar import threshold_text
from server_control.protocol import runtime_settings
from server_control.session.session import Session
from tests.support import fifth_setting
from tests.support.fifth_setting import FAKE, KEY
from tests.support.sim import REPO_ROOT, sim_argv, start_sim
from tests.support.wait import until


@pytest.fixture
def fifth(monkeypatch):
    monkeypatch.setattr(runtime_settings, "SETTINGS", (*runtime_settings.SETTINGS, FAKE))
    return FAKE


@pytest.fixture
def fifth_sim(tmp_path, fifth):
    """A simulator (2 TP ranks in its process) whose table holds the fifth row, started at 4."""
    from server_control.host.ports import free_port

    port = free_port()
    argv = sim_argv(port, "--sim-light", FAKE.flag, "4", tp=2, time_scale=20.0)
    argv[1:3] = ["-c", fifth_setting.SIM_BOOT]  # `-m server_control.sim` with the row installed first
    sim = start_sim(tmp_path, port=port, argv=argv)
    try:
        sim.wait_ready()
        yield sim
    finally:
        sim.stop()


def _cli(capsys, *argv: str) -> tuple[int, str]:
    rc = cli_main(list(argv))
    return rc, capsys.readouterr().out


def test_the_fifth_row_is_read_set_refused_and_journaled_by_the_command_line(fifth_sim, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(tmp_path / "state"))
    url = ["--url", fifth_sim.url]
    rc, out = _cli(capsys, "setting", "--json", *url)
    assert rc == 0 and json.loads(out)["settings"]["knob"] == [4]  # the simulator's start value
    rc, out = _cli(capsys, "setting", "knob", "7", *url)
    assert rc == 0 and out.startswith(f"applied: {KEY}=7 read back on 1 DP rank(s) x 2 TP ranks"), out
    rc, out = _cli(capsys, "setting", "knob", *url)
    assert rc == 0 and out.strip() == "knob per DP rank: 7"
    rc, _ = _cli(capsys, "setting", "knob", "12", *url)  # the row's own check: refused here, nothing sent
    assert rc == 2
    rc, out = _cli(capsys, "setting", "knob", *url)
    assert rc == 0 and out.strip() == "knob per DP rank: 7"
    rc, out = _cli(capsys, "journal", "--json", *url)
    entries = [json.loads(line) for line in out.splitlines()]
    assert [(e["action"], e["key"], e["new"], e["result"]) for e in entries] == [("knob", KEY, 7, "applied")]
    assert "Dynamic speculation: fake_knob changed 4 -> 7" in fifth_sim.log_path.read_text()


def test_a_bad_value_of_the_fifth_row_is_refused_with_its_reason(fifth, capsys):
    rc = cli_main(["setting", "knob", "12", "--url", "http://127.0.0.1:9"])
    assert rc == 2
    assert f"refused: {KEY} 12 is absurd: the maximum is 9" in capsys.readouterr().err


async def test_the_fifth_row_shows_on_the_status_bar(fifth_sim):
    session = Session.attach(fifth_sim.url, poll_interval_s=0.2)
    await session.start()
    try:
        result = await session.set_setting(KEY, 5)
        assert result.operation == "knob" and result.change is not None and result.change.state == "applied"
        assert "knob 5 applied" in threshold_text(session.snapshot()).plain
        await until(lambda: session.last is not None and session.last.ranks[0].settings.get(KEY) == 5, 5.0)
    finally:
        await session.close()


PATCH_PROBE = """
import json, sys
import tests.support.fifth_setting as f
f.install()
from server_control.sglang_patch import hook
hook.install()
import argparse
from sglang.srt.server_args import ServerArgs
out = {"field": f.KEY in ServerArgs.__struct_fields__}
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out["parsed"] = getattr(parser.parse_args(["--model-path", "m", f.FAKE.flag, "6"]), f.KEY)
try:
    parser.parse_args(["--model-path", "m", f.FAKE.flag, "12"])
except SystemExit:
    out["refused"] = True
from server_control.sglang_patch import worker as patch_worker
from server_control.sglang_patch.targets import internal_state
from types import SimpleNamespace
args = SimpleNamespace(**{s.key: s.default for s in __import__("server_control.protocol.runtime_settings", fromlist=["x"]).SETTINGS})
setattr(args, f.KEY, 6)
settings = patch_worker.read_settings(args)
from server_control.protocol import decision, runtime_settings
switch = decision.SpecSwitch(**{s.field: s.validate(settings[s.key]) for s in runtime_settings.SETTINGS})
out["switch"] = switch.setting(f.FAKE.field)
line, new = runtime_settings.apply(switch, f.FAKE, 8)
out["line"], out["published"] = line, switch.snapshot().get(f.FAKE.field)
try:
    internal_state._check(f.KEY, 10)
except ValueError as exc:
    out["check"] = str(exc)
from server_control.sglang_patch import fields
out["allowlist"] = f.KEY in fields.new_fields()
state = {}
internal_state._publish(state, SimpleNamespace(switch=switch, explorer=SimpleNamespace(share=0.0), snapshot=dict), None, None)
out["internal_state"] = state.get(f.KEY)
print(json.dumps(out))
"""


@pytest.mark.sglang
def test_the_fifth_row_is_a_server_argument_of_the_patch_and_set_on_its_switch(fifth):
    pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    done = subprocess.run(
        [sys.executable, "-c", PATCH_PROBE], capture_output=True, text=True, timeout=240, env=env, cwd=REPO_ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {
        "field": True,
        "parsed": 6,
        "refused": True,
        "switch": 6,
        "line": "Dynamic speculation: fake_knob changed 6 -> 8",
        "published": 8,
        "check": f"{KEY} 10 is absurd: the maximum is 9",
        "allowlist": True,
        "internal_state": 8,
    }
