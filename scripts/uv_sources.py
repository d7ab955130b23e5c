"""pip's package sources as `uv pip install` arguments, one a line (scripts/test).

uv reads no pip configuration, and a machine's pip may be configured to find packages on
its own disk (find-links, extra local indexes, a constraints file capping a release to the
one there). This prints the same sources for uv, from ``pip config list`` (read on stdin),
the environment's PIP_* variables first, then the ``install`` section, then ``global``:
``--index-url``, ``--extra-index-url``, ``--find-links``, ``--constraint`` (or
``--no-index``), and ``--index-strategy unsafe-best-match``: like pip, the best version
among all indexes (uv's default takes the first index that has the package). A CA bundle
pip is told of is printed as ``SSL_CERT_FILE=PATH`` on the last line, for the caller to
export. Nothing here installs anything.
"""

from __future__ import annotations

import shlex
import sys

LISTS = {
    "index-url": "--index-url",
    "extra-index-url": "--extra-index-url",
    "find-links": "--find-links",
    "constraint": "--constraint",
}
ORDER = (":env:", "install", "global")  # pip's precedence, highest first


def settings(text: str) -> dict[str, str]:
    """``pip config list``'s lines (``section.key='value'``) as key -> the value that wins."""
    found: dict[tuple[str, str], str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if not sep or "." not in name:
            continue
        section, _, key = name.rpartition(".")
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        found[(section, key)] = " ".join(words)
    out: dict[str, str] = {}
    for section in reversed(ORDER):
        out.update({key: v for (s, key), v in found.items() if s == section})
    return out


def uv_arguments(config: dict[str, str]) -> list[str]:
    args: list[str] = []
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        args.append("--no-index")
    for key in LISTS:
        for value in config.get(key, "").split():
            args += [f"--{key}", value]
    args += ["--index-strategy", "unsafe-best-match"]
    return args


def main() -> int:
    config = settings(sys.stdin.read())
    print("\n".join(uv_arguments(config)))
    if config.get("cert"):
        print(f"SSL_CERT_FILE={config['cert']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
