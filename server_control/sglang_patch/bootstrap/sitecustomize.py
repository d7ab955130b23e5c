"""specconsole bootstrap: runs at start-up of every Python process that has this
directory first on PYTHONPATH (``python -m server_control.sglang_patch.serve`` puts it
there; SGLang's spawned scheduler/detokenizer processes inherit the environment).

1. Makes ``server_control`` importable from this checkout by registering the package
   itself (the project root is NOT put on ``sys.path``: its top-level ``tests``,
   ``console`` and ``scripts`` could shadow other modules), and installs the specconsole
   import hook (cheap: no SGLang import happens here).
2. Chains to the ``sitecustomize`` this file shadows, if any. The hook is already in
   place, so a chained sitecustomize (or a ``.pth`` file it processes, e.g. through
   ``site.addsitedir``) that imports SGLang's server args still gets the new fields.
3. In the launch_server process that ``serve`` started (marked by ``SPECCONSOLE_SERVE_MAIN``),
   moves the API keys from the environment to ``sys.argv`` (``protocol/keys.py``), so they never
   appear on a command line and spawned children do not inherit them.
4. Imports the modules named in ``SPECCONSOLE_SGLANG_PRELOAD`` (comma-separated), after
   the hook and before any SGLang code of the process runs. The project root is on
   ``sys.path`` (last) for those imports only, so the test rig's preload can be named.
Paths are compared after ``realpath`` and a re-entry guard stops this file from running
twice in one process (the directory twice on PYTHONPATH, or reached through a symlink).
Never raises: a failure is written to stderr as one line naming what failed.
The same file is run by the ``.pth`` that ``specconsole patch install`` writes into an
SGLang environment's site-packages (``install.py``); then step 2 is skipped (``site``
imports the real sitecustomize itself afterwards).
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))
_PACKAGE = os.path.dirname(os.path.dirname(_HERE))  # .../server_control
_ROOT = os.path.dirname(_PACKAGE)
_GUARD = "_specconsole_bootstrap_ran"


def _real(path: str) -> str:
    return os.path.realpath(path or os.curdir)


def _register_package() -> None:
    """``server_control`` from this checkout, without the project root on sys.path."""
    if "server_control" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "server_control", os.path.join(_PACKAGE, "__init__.py"), submodule_search_locations=[_PACKAGE]
    )
    assert spec is not None and spec.loader is not None  # a file location always has both
    module = importlib.util.module_from_spec(spec)
    sys.modules["server_control"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop("server_control", None)
        raise


def _chain_previous() -> None:
    paths = [p for p in sys.path if _real(p) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    if spec.origin and _real(spec.origin) == _real(__file__):
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_specconsole_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _preload(names: list[str]) -> None:
    added = not any(_real(p) == _ROOT for p in sys.path)
    if added:
        sys.path.append(_ROOT)
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001 - a preload that fails is reported; the server still starts
                sys.stderr.write(f"specconsole bootstrap: SPECCONSOLE_SGLANG_PRELOAD module {name!r} failed to import: {exc!r}\n")
    finally:
        if added and _ROOT in sys.path:
            sys.path.remove(_ROOT)


def _main() -> None:
    if getattr(sys, _GUARD, False):
        return  # this file again (a second copy on the path, a symlink): already done
    setattr(sys, _GUARD, True)
    try:
        _register_package()
        from server_control.sglang_patch import hook

        hook.install()
    except Exception as exc:  # noqa: BLE001 - no hook: the server runs unpatched and says so
        sys.stderr.write(f"Dynamic speculation disable NOT active: the specconsole import hook could not be installed: {exc!r}\n")
    try:
        if not globals().get("_SPECCONSOLE_FROM_PTH"):  # from a .pth: site imports it next
            _chain_previous()
    except Exception as exc:  # noqa: BLE001 - another sitecustomize's failure is theirs, reported, not ours to raise
        sys.stderr.write(f"specconsole bootstrap: the previous sitecustomize failed: {exc!r}\n")
    if os.environ.pop("SPECCONSOLE_SERVE_MAIN", None) == "1":
        try:
            from server_control.sglang_patch import hook

            hook.mark_serve_main()
            from server_control.protocol.keys import take_key_flags

            sys.argv[:] = take_key_flags(sys.argv)
        except Exception as exc:  # noqa: BLE001 - the server starts without our key flags rather than not at all
            sys.stderr.write(f"specconsole bootstrap: could not pass the API keys: {exc!r}\n")
    names = [n.strip() for n in os.environ.get("SPECCONSOLE_SGLANG_PRELOAD", "").split(",")]
    if any(names):
        _preload([n for n in names if n])


_main()
