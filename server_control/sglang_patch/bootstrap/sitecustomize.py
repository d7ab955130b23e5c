"""specconsole bootstrap: runs at start-up of every Python process that has this
directory first on PYTHONPATH (``python -m server_control.sglang_patch.serve`` puts it
there; SGLang's spawned scheduler/detokenizer processes inherit the environment).

1. Chains to the ``sitecustomize`` this file shadows, if any.
2. Installs the specconsole import hook (cheap: no SGLang import happens here).
3. Imports the modules named in ``SPECCONSOLE_SGLANG_PRELOAD`` (comma-separated), after
   the hook and before any SGLang code of the process runs.
4. In the launch_server process that ``serve`` started (marked by ``SPECCONSOLE_SERVE_MAIN``),
   moves the API keys from the environment to ``sys.argv`` (``keys.py``), so they never
   appear on a command line and spawned children do not inherit them.
Never raises: a failure is written to stderr as one line naming what failed.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _chain_previous() -> None:
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_specconsole_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _ensure_project_on_path() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    if importlib.util.find_spec("server_control") is None and root not in sys.path:
        sys.path.insert(1, root)


def _main() -> None:
    try:
        _chain_previous()
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write(f"specconsole bootstrap: the previous sitecustomize failed: {exc!r}\n")
    try:
        _ensure_project_on_path()
        from server_control.sglang_patch import hook
        hook.install()
    except Exception as exc:  # noqa: BLE001
        sys.stderr.write("Dynamic speculation disable NOT active: "
                         f"the specconsole import hook could not be installed: {exc!r}\n")
    if os.environ.pop("SPECCONSOLE_SERVE_MAIN", None) == "1":
        try:
            from server_control.keys import take_key_flags
            sys.argv[:] = take_key_flags(sys.argv)
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"specconsole bootstrap: could not pass the API keys: {exc!r}\n")
    for name in filter(None, (n.strip() for n in
                              os.environ.get("SPECCONSOLE_SGLANG_PRELOAD", "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            sys.stderr.write(f"specconsole bootstrap: SPECCONSOLE_SGLANG_PRELOAD module "
                             f"{name!r} failed to import: {exc!r}\n")


_main()
