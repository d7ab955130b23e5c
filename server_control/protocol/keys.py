"""API keys handed to the server through the environment, never on its command line.

``--api-key X`` on a command line is readable by every user of the host (``ps``,
``/proc/PID/cmdline``). specconsole launches with the keys in these variables instead;
the server process (the bootstrap ``sitecustomize`` in patched SGLang, the argument parser
in the simulator) removes them from its environment, so spawned children do not inherit
them, and appends the flags to its own ``sys.argv``, which ``ps`` does not show.
Standard library only: this runs inside SGLang processes.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

API_KEY_ENV = "SPECCONSOLE_API_KEY"
ADMIN_API_KEY_ENV = "SPECCONSOLE_ADMIN_API_KEY"
FLAGS = (("--api-key", API_KEY_ENV), ("--admin-api-key", ADMIN_API_KEY_ENV))


def take_key_flags(argv: list[str], environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Pop the key variables from ``environ`` (default os.environ) and return ``argv`` with
    the matching flags appended; a flag already on ``argv`` wins over the variable."""
    environ = os.environ if environ is None else environ
    out = list(argv)
    for flag, var in FLAGS:
        value = environ.pop(var, None)
        if value and not any(a == flag or a.startswith(flag + "=") for a in argv):
            out += [flag, value]
    return out
