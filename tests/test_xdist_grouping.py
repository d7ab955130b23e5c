"""Under ``--dist loadgroup`` (scripts/test) a module whose tests share a module-scoped
fixture runs in one worker, so the fixture is set up once and its tests run in file order
(tests/conftest.py, ``shared_fixture_group``). Run here on a throwaway module in a real
pytest with two xdist workers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODULE = """
import os
import pytest

@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    with open(os.environ["SETUPS_FILE"], "a") as f:
        f.write(f"{os.getpid()}\\n")
    return []

@pytest.mark.parametrize("i", range(8))
def test_in_file_order(launched, i):
    launched.append(i)
    assert launched == list(range(i + 1))

@pytest.mark.parametrize("i", range(8))
def test_alone(i):
    assert i >= 0
"""


def test_a_module_sharing_a_fixture_sets_it_up_once_and_runs_in_order(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "test_shared.py").write_text(MODULE)
    setups = tmp_path / "setups"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SETUPS_FILE": str(setups)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup", "test_shared.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "16 passed" in done.stdout, done.stdout[-2000:]
    assert len(setups.read_text().split()) == 1, "the module's fixture was set up in more than one worker"
