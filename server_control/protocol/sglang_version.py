"""The one SGLang version this project targets: the patch refuses any other
(server_control/sglang_patch/gate.py), the simulator reports it as its own
(server_control/sim/), a profile's interpreter is checked against it
(server_control/config/interpreter.py)."""

from __future__ import annotations

SGLANG_VERSION = "0.5.23"
