"""``python -m server_control.sglang_patch.serve <launch_server args>``: the patched server.

Same arguments as ``python -m sglang.launch_server``. Puts the bootstrap directory (a
``sitecustomize`` that registers our package and installs the import hook) first on
``PYTHONPATH``, takes the project root off it (its top-level ``tests``, ``console``,
``scripts`` could shadow other modules in SGLang's processes), and replaces this process
(same pid, same process group) with ``python -m sglang.launch_server``; every process
SGLang spawns inherits the variable, so the patch is loaded in the HTTP server, every
scheduler rank and the detokenizer.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

BOOTSTRAP_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bootstrap")
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def patched_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default os.environ) with the bootstrap first on PYTHONPATH and
    the project root taken off it (paths compared after realpath)."""
    env = dict(os.environ if env is None else env)
    ours = {os.path.realpath(BOOTSTRAP_DIR), os.path.realpath(PROJECT_ROOT)}
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.realpath(p) not in ours]
    env["PYTHONPATH"] = os.pathsep.join([BOOTSTRAP_DIR, *parts])
    return env


def command(argv: list[str], python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "sglang.launch_server", *argv]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    cmd = command(argv)
    sys.stdout.flush()
    sys.stderr.flush()
    env = patched_env()
    env["SPECCONSOLE_SERVE_MAIN"] = "1"  # the bootstrap moves API keys from env to sys.argv
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    main()
