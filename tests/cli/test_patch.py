"""`specconsole patch install|uninstall|status --python PY`: a .pth in PY's site-packages
runs this checkout's bootstrap at every start of PY (a fresh venv here: real interpreter,
real site-packages, real .pth processing), under -I and -E too; a missing bootstrap is one
clear line; uninstall leaves no trace. The real SGLang server through it:
tests/real_sglang/test_installed_patch_with_adaptive.py."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from server_control.sglang_patch import install

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import sys, json; ran = getattr(sys, '_specconsole_bootstrap_ran', False); "
    "m = sys.modules.get('server_control'); print(json.dumps([ran, getattr(m, '__file__', None),"
    " 'server_control.sglang_patch.hook' in sys.modules]))"
)


@pytest.fixture
def env_python(tmp_path) -> str:
    venv.EnvBuilder(with_pip=False).create(tmp_path / "venv")
    python = str(tmp_path / "venv" / "bin" / "python")
    # never touch a shared interpreter: the venv's own site-packages only
    assert install.site_dir(python).is_relative_to(tmp_path / "venv")
    return python


def probe(python: str, *flags: str) -> tuple[list, str]:
    res = subprocess.run([python, *flags, "-c", PROBE], capture_output=True, text=True, timeout=60, cwd="/")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), res.stderr


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "console", "patch", *args], capture_output=True, text=True, timeout=120, cwd=str(ROOT)
    )


def test_install_loads_the_bootstrap_in_every_start_and_uninstall_removes_it(env_python):
    assert probe(env_python)[0] == [False, None, False]
    res = cli("install", "--python", env_python, "--json")
    assert res.returncode == 0, res.stderr
    pth = Path(json.loads(res.stdout)["installed"])
    assert pth.name == install.PTH_NAME and pth.is_file()
    for flags in ((), ("-I",), ("-E",)):  # site-packages .pth files run under -I / -E too
        ran, where, hooked = probe(env_python, *flags)[0]
        assert ran and hooked, flags
        assert where == str(ROOT / "server_control" / "__init__.py")
    assert probe(env_python, "-S")[0] == [False, None, False]  # no site: nothing can load
    st = cli("status", "--python", env_python, "--json")
    assert st.returncode == 0 and json.loads(st.stdout) == {
        "python": env_python,
        "site_dir": str(pth.parent),
        "pth": str(pth),
        "bootstrap": str(install.BOOTSTRAP),
        "bootstrap_exists": True,
        "loads": True,
        "installed": True,
    }
    site_before = sorted(p.name for p in pth.parent.iterdir())
    res = cli("uninstall", "--python", env_python, "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["removed"] == str(pth)
    assert sorted(p.name for p in pth.parent.iterdir()) == [n for n in site_before if n != install.PTH_NAME]
    assert probe(env_python)[0] == [False, None, False]
    st = cli("status", "--python", env_python)
    assert st.returncode == 1 and st.stdout.startswith("not installed in ")


def test_a_missing_bootstrap_is_one_clear_line(env_python, tmp_path):
    gone = tmp_path / "moved" / "sitecustomize.py"
    install.install(env_python, bootstrap=gone)
    (ran, _, _), err = probe(env_python)
    assert not ran
    assert err.strip().splitlines() == [install.MISSING.format(path=gone, python=env_python)]
    st = install.status(env_python)
    assert st.pth and st.bootstrap == str(gone) and not st.bootstrap_exists and not st.loads
    install.uninstall(env_python)


def test_a_bad_interpreter_is_named():
    res = cli("status", "--python", "/nonexistent/python")
    assert res.returncode == 1
    assert "--python /nonexistent/python: no such interpreter" in res.stderr
