"""A user keymap in the preferences rebinds actions by their binding ids (issue 18 item 7)."""

from __future__ import annotations

import json

from console.app import SpecConsoleApp
from tests.console.screen_text import toasts, wait_for


def write_prefs(tmp_path, monkeypatch, data: dict):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "console.json").write_text(json.dumps(data))
    monkeypatch.setenv("SPECCONSOLE_STATE_DIR", str(state))
    return state / "console.json"


async def test_the_keymap_rebinds_an_action_and_names_a_bad_entry(fake, tmp_path, monkeypatch):
    path = write_prefs(tmp_path, monkeypatch, {"keymap": {"threshold_up": "u", "no_such_action": "z", "threshold_down": ""}})
    app = SpecConsoleApp(fake, remember_theme=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("u")
        await wait_for(pilot, lambda: ("set_threshold", 6) in fake.calls, "N+1 from the rebound key", timeout=10)
        text = toasts(app)
        assert f"{path}: keymap.no_such_action: no such action" in text
        assert "keymap.threshold_down: keys must be a non-empty string" in text
        await pilot.press("minus")  # the entry left out keeps its own keys
        await wait_for(pilot, lambda: ("set_threshold", 5) in fake.calls, "N-1 from its own key", timeout=10)


async def test_a_theme_change_keeps_the_keymap(fake, tmp_path, monkeypatch):
    path = write_prefs(tmp_path, monkeypatch, {"keymap": {"threshold_up": "u"}})
    app = SpecConsoleApp(fake, remember_theme=True)
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await pilot.pause()
    assert json.loads(path.read_text()) == {"keymap": {"threshold_up": "u"}, "theme": "nord"}
