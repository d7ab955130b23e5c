"""Install the patch into an SGLang environment: a ``.pth`` file in its site-packages
that runs this checkout's bootstrap (``bootstrap/sitecustomize.py``) at interpreter
start-up, so a launcher that runs ``python -m sglang.launch_server`` itself (Kubernetes /
LWS manifests, Ray, a gateway spawning workers) gets the patch with no PYTHONPATH and no
``serve``. ``specconsole patch install|uninstall|status --python PY`` (console/cli/patch.py).

Python processes ``.pth`` files of site-packages also under ``-I`` and ``-E`` (they
ignore PYTHON* variables and the user site, not site-packages), so the installed patch
works there; under ``-S`` no ``.pth`` runs and nothing can load it: ``status`` says so.
A bootstrap that is gone (the checkout moved) makes the ``.pth`` write one line naming
it, then SGLang starts without the patch. Standard library only.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

PTH_NAME = "specconsole_sglang_patch.pth"
BOOTSTRAP = Path(__file__).resolve().parent / "bootstrap" / "sitecustomize.py"
MISSING = (
    "specconsole patch: the bootstrap {path} is missing (the checkout moved or was "
    "deleted); run `specconsole patch install --python {python}` again, or "
    "`specconsole patch uninstall`; SGLang starts without the patch"
)
PROBE_TIMEOUT_S = 60
OUTPUT_CAP = 64 * 1024


class InstallError(RuntimeError):
    """Why the environment cannot take the patch (names the interpreter)."""


@dataclass(frozen=True)
class PatchStatus:
    python: str
    site_dir: str
    pth: str | None  # the installed .pth, None when not installed
    bootstrap: str | None  # the bootstrap the .pth runs
    bootstrap_exists: bool
    loads: bool  # a plain interpreter start of PY runs the bootstrap

    def to_json(self) -> dict[str, object]:
        return {
            "python": self.python,
            "site_dir": self.site_dir,
            "pth": self.pth,
            "bootstrap": self.bootstrap,
            "bootstrap_exists": self.bootstrap_exists,
            "loads": self.loads,
            "installed": self.pth is not None,
        }


def _run(python: str, code: str, *flags: str) -> str:
    try:
        res = subprocess.run(
            [python, *flags, "-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise InstallError(f"--python {python}: no such interpreter") from None
    except subprocess.TimeoutExpired:
        raise InstallError(f"--python {python}: did not answer within {PROBE_TIMEOUT_S} s") from None
    if res.returncode != 0:
        raise InstallError(f"--python {python}: exited {res.returncode}: {res.stderr[-OUTPUT_CAP:].strip()}")
    return res.stdout[-OUTPUT_CAP:]


def site_dir(python: str) -> Path:
    """The site-packages (purelib) of ``python``, where its ``.pth`` files are read."""
    out = _run(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    path = Path(out.strip().splitlines()[-1] if out.strip() else "")
    if not path.is_dir():
        raise InstallError(f"--python {python}: its site-packages {path} is not a directory")
    return path


def pth_text(bootstrap: Path, python: str) -> str:
    """One executable line (``.pth`` runs lines starting with ``import``)."""
    missing = MISSING.format(path=bootstrap, python=python)
    # once per process: a venv's lib64 -> lib link makes site read the same .pth twice
    return (
        "import os, sys; _specconsole_p = " + repr(str(bootstrap)) + "; "
        "_specconsole_seen = getattr(sys, '_specconsole_pth_ran', False); "
        "sys._specconsole_pth_ran = True; "
        "None if _specconsole_seen else exec(compile(open(_specconsole_p).read(), _specconsole_p, 'exec'), "
        "{'__file__': _specconsole_p, '__name__': '_specconsole_pth_bootstrap', "
        "'_SPECCONSOLE_FROM_PTH': True}) if os.path.isfile(_specconsole_p) else "
        "sys.stderr.write(" + repr(missing + "\n") + ")\n"
    )


def install(python: str, bootstrap: Path = BOOTSTRAP) -> Path:
    target = site_dir(python) / PTH_NAME
    tmp = target.with_suffix(".tmp")
    try:
        tmp.write_text(pth_text(bootstrap, python))
        os.replace(tmp, target)
    except OSError as exc:
        raise InstallError(f"cannot write {target}: {exc}") from None
    return target


def uninstall(python: str) -> Path | None:
    """Remove the ``.pth``; returns its path, or None when it was not there."""
    target = site_dir(python) / PTH_NAME
    try:
        target.unlink()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InstallError(f"cannot remove {target}: {exc}") from None
    return target


def _bootstrap_of(pth: Path) -> str | None:
    text = pth.read_text(errors="replace")[:OUTPUT_CAP]
    marker = "_specconsole_p = "
    if marker not in text:
        return None
    literal = text.split(marker, 1)[1].split(";", 1)[0].strip()
    return literal[1:-1] if literal[:1] in "'\"" else None


def status(python: str) -> PatchStatus:
    site = site_dir(python)
    pth = site / PTH_NAME
    installed = pth.is_file()
    boot = _bootstrap_of(pth) if installed else None
    probe = "import json, sys; print(json.dumps(bool(getattr(sys, '_specconsole_bootstrap_ran', False))))"
    loads = bool(json.loads(_run(python, probe).strip().splitlines()[-1]))
    return PatchStatus(python, str(site), str(pth) if installed else None, boot, bool(boot and os.path.isfile(boot)), loads)
