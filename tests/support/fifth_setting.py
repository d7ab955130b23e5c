"""A made-up fifth runtime setting, one row in ``protocol/runtime_settings.py``'s table, to
prove every place derives from the table (tests/test_runtime_settings_table.py).

``install()`` adds the row in this process; ``SIM_BOOT`` is the ``python -c`` text that does
it in a simulator (then runs ``python -m server_control.sim`` with the same argv);
``PATCH_BOOT`` in a process that then imports SGLang with the patch's hook.
"""

from __future__ import annotations

from server_control.protocol import decision, runtime_settings
from server_control.protocol.runtime_settings import RuntimeSetting

KEY = "speculative_disable_fake_knob"


def _validate(value: object) -> int:
    return decision.validate_int(KEY, value, 0, 9)


FAKE = RuntimeSetting(
    key=KEY,
    field="fake_knob",
    word="knob",
    label="knob",
    profile_key="fake_knob",
    default=3,
    validate=_validate,
    help="a made-up knob of the tests, 0..9",
)


def install() -> None:
    if FAKE not in runtime_settings.SETTINGS:
        runtime_settings.SETTINGS = (*runtime_settings.SETTINGS, FAKE)


SIM_BOOT = (
    "import tests.support.fifth_setting as f; f.install(); import runpy; "
    "runpy.run_module('server_control.sim', run_name='__main__', alter_sys=True)"
)
