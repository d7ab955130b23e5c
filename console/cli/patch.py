"""`specconsole patch`: install the SGLang patch into an SGLang environment, so a plain
``python -m sglang.launch_server ... --speculative-disable-batch-threshold N`` (a launcher
that runs SGLang itself: Kubernetes / LWS manifests, Ray, a gateway) loads it with no
PYTHONPATH and no ``serve`` (server_control/sglang_patch/install.py).

    specconsole patch install   --python /path/to/venv/bin/python [--json]
    specconsole patch uninstall --python PY [--json]
    specconsole patch status    --python PY [--json]

``install`` writes ``specconsole_sglang_patch.pth`` into PY's site-packages, pointing at
this checkout's bootstrap (install again after moving the checkout); ``uninstall``
removes it, the only trace. ``status`` says whether it is installed, whether the
bootstrap it names exists, and whether a plain start of PY runs it.

Exit codes: 0 done (status: installed and loading); 1 failed (status: not installed, or
installed but not loading); 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys

from console.cli.common import EXIT_FAILED, EXIT_OK, error
from server_control.sglang_patch import install

EPILOG = "Exit codes: 0 done (status: installed and loading), 1 failed or not installed, 2 bad arguments."


def _print(args: argparse.Namespace, payload: dict, text: str) -> None:
    print(json.dumps(payload) if args.json else text)


def cmd_patch(args: argparse.Namespace) -> int:
    python = args.python or sys.executable
    try:
        if args.action == "install":
            path = install.install(python)
            _print(
                args,
                {"installed": str(path), "python": python},
                f"installed {path} (runs {install.BOOTSTRAP} at every start of {python})",
            )
            return EXIT_OK
        if args.action == "uninstall":
            gone = install.uninstall(python)
            _print(
                args,
                {"removed": str(gone) if gone else None, "python": python},
                f"removed {gone}" if gone else f"not installed in {python}",
            )
            return EXIT_OK
        st = install.status(python)
    except install.InstallError as exc:
        error(str(exc))
        return EXIT_FAILED
    if st.pth is None:
        text = f"not installed in {python} (site-packages {st.site_dir})"
    elif not st.bootstrap_exists:
        text = f"installed ({st.pth}) but its bootstrap {st.bootstrap} is missing"
    else:
        text = (
            f"installed ({st.pth}), bootstrap {st.bootstrap}; a plain start "
            + ("loads it" if st.loads else "does NOT load it")
            + "; `python -S` never loads it (no site, no .pth)"
        )
    _print(args, st.to_json(), text)
    return EXIT_OK if st.pth is not None and st.loads else EXIT_FAILED


def register(sub) -> None:
    p = sub.add_parser(
        "patch",
        help="install the SGLang patch into an SGLang environment (.pth)",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--python", help="the SGLang environment's interpreter (default: this one)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=cmd_patch)
