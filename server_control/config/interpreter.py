"""Can a profile's interpreter run the patched server? Asked of the interpreter itself,
without importing SGLang (that takes 20+ s): the package must be findable and its version
the one the patch targets (server_control/protocol/sglang_version.py)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from server_control.protocol.sglang_version import SGLANG_VERSION

_PROBE = (
    "import importlib.util as u, importlib.metadata as m\ns = u.find_spec('sglang')\nprint(m.version('sglang') if s else '')\n"
)


@dataclass(frozen=True)
class SglangCheck:
    python: str
    version: str | None  # the sglang version that interpreter finds, None if none
    problem: str | None  # why a real launch would fail (or run unpatched), None if fine

    def describe(self) -> str:
        return self.problem or f"sglang {self.version} (found by {self.python})"


def check_sglang(python: str, timeout_s: float = 30.0) -> SglangCheck:
    try:
        out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return SglangCheck(python, None, f"{python} cannot import sglang: {exc}")
    version = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else None
    if version is None:
        why = (out.stderr.strip().splitlines() or ["no module named 'sglang'"])[-1]
        if out.returncode == 0:
            why = "no module named 'sglang'"
        return SglangCheck(python, None, f"{python} cannot import sglang ({why})")
    if version != SGLANG_VERSION:
        return SglangCheck(
            python,
            version,
            f"{python} has sglang {version}; the patch is gated to "
            f"{SGLANG_VERSION} (the server would run without dynamic "
            "speculation disable)",
        )
    return SglangCheck(python, version, None)
