"""httpx, without its command-line client: every module of ours imports httpx from here.

httpx's ``__init__`` also imports ``httpx._main``, its command-line client, whenever click,
rich and pygments can be imported, and Textual brings all three: ``python -X importtime``
put ``httpx._main`` at 64 of httpx's 103 ms in a ``specconsole status`` process, and every
command, supervisor and keeper of ours paid it for a tool none of them runs (measured in
docs/cpu-rig.md, "The fast loop"). It also loaded Rich into ``server_control``'s processes,
which the import contracts keep free of it.

While httpx's ``__init__`` runs, a stand-in answers for ``httpx._main``; then it is taken out
of ``sys.modules`` again, so an explicit ``import httpx._main`` later loads the real one.
``httpx.main`` (the console script's entry) says why it is missing. If httpx was imported
before this module (by SGLang, by a test), that import stands as it is.
"""

from __future__ import annotations

import sys
import types

_CLI = "httpx._main"


def _main() -> None:
    raise SystemExit("httpx's command-line client is not loaded in this process (server_control/net/lean_httpx.py)")


_stand_in = None
if "httpx" not in sys.modules and _CLI not in sys.modules:
    _stand_in = types.ModuleType(_CLI, "stands in for httpx's command-line client while httpx loads")
    _stand_in.main = _main  # type: ignore[attr-defined]
    sys.modules[_CLI] = _stand_in
try:
    import httpx as httpx  # the re-export every module of ours uses
finally:
    if _stand_in is not None and sys.modules.get(_CLI) is _stand_in:
        del sys.modules[_CLI]
