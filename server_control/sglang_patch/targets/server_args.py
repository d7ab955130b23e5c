"""``sglang.srt.server_args``: the four fields join ``ServerArgs`` as it is built.

Before the module executes: run the gate (version + anchors) and wrap
``collect_input_fields`` so the four new fields are in the list ``msgspec.defstruct``
builds ``ServerArgs`` from (fields.py). This also runs when a spawned process unpickles a
ServerArgs: unpickling imports the class by reference first. After it executed: check the
fields are there; where they are not (or the gate said ``off``), the process ``serve``
started takes the four flags off ``sys.argv`` so SGLang's parser still starts the server.
"""

from __future__ import annotations

import sys
from types import ModuleType

from server_control.sglang_patch import fields, hook


def before() -> None:
    if hook.mode() != hook.OFF:
        fields.wrap_collect_input_fields()


def after(module: ModuleType) -> None:
    if not (hook.mode() != hook.OFF and fields.check_server_args(module)) and hook.serve_main():
        fields.drop_flags_from_argv(sys.argv)
