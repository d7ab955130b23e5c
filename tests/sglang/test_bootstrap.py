"""The bootstrap sitecustomize in a real interpreter: only our package is importable (not
the project root), the hook is in place before a shadowed sitecustomize (or a .pth file it
processes) imports SGLang's server args, and it runs once however often its directory is
on PYTHONPATH (twice, through a symlink)."""

import json
import os
import subprocess
import sys

import pytest

from server_control.sglang_patch import serve

ROOT = os.path.realpath(serve.PROJECT_ROOT)
PROBE = r"""
import importlib.util, json, os, sys
from server_control.sglang_patch import hook
root = sys.argv[1]
facts = {"hook": hook.installed(),
         "root_on_path": any(os.path.realpath(p or ".") == root for p in sys.path),
         "tests": "tests" in sys.modules or importlib.util.find_spec("tests") is not None,
         "server_control": os.path.realpath(sys.modules["server_control"].__file__),
         "chained": getattr(sys, "_chained_runs", 0),
         "preload": getattr(sys, "_specconsole_test_preload", None)}
sa = sys.modules.get("sglang.srt.server_args")
if sa is not None:
    facts["fields"] = [f for f in sa.ServerArgs.__struct_fields__ if f.startswith("speculative_disable")]
print("FACTS " + json.dumps(facts))
"""
CHAINED = "import sys\nsys._chained_runs = getattr(sys, '_chained_runs', 0) + 1\n"


def probe(pythonpath: list[str], cwd, **env_extra) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECCONSOLE_")}
    env["PYTHONPATH"] = os.pathsep.join(pythonpath)
    env = serve.patched_env(env)
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-c", PROBE, ROOT], env=env, cwd=str(cwd), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("FACTS ", 1)[1]), proc.stderr


def test_only_our_package_is_on_the_path_not_the_project_root(tmp_path):
    env = serve.patched_env({"PYTHONPATH": os.pathsep.join([serve.PROJECT_ROOT, "/x"])})
    assert env["PYTHONPATH"].split(os.pathsep) == [serve.BOOTSTRAP_DIR, "/x"]
    facts, stderr = probe([serve.PROJECT_ROOT], tmp_path)
    assert facts["hook"] is True
    assert facts["server_control"] == os.path.join(ROOT, "server_control", "__init__.py")
    assert facts["root_on_path"] is False
    assert facts["tests"] is False  # the project's top-level packages shadow nothing
    assert "specconsole bootstrap" not in stderr and "NOT active" not in stderr


def test_a_preload_from_the_project_still_loads(tmp_path):
    """The test rig names its preload module (tests.real_sglang.rig.preload): the project
    root is on sys.path for the preload imports only."""
    facts, stderr = probe([serve.PROJECT_ROOT], tmp_path, SPECCONSOLE_SGLANG_PRELOAD="tests.sglang.preload_probe")
    assert facts["preload"] == {"sglang_imported_before": False}, stderr[-3000:]
    assert facts["root_on_path"] is False


def test_bootstrap_twice_on_the_path_and_through_a_symlink_runs_once(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(CHAINED)
    link = tmp_path / "bootstrap-link"
    link.symlink_to(serve.BOOTSTRAP_DIR, target_is_directory=True)
    facts, stderr = probe([str(link), serve.BOOTSTRAP_DIR, str(link), str(other)], tmp_path)
    assert facts["hook"] is True
    assert facts["chained"] == 1, stderr[-3000:]  # the shadowed one ran, once
    assert "NOT active" not in stderr and "specconsole bootstrap" not in stderr, stderr[-3000:]


@pytest.mark.sglang
@pytest.mark.parametrize("how", ["import", "pth"])
def test_a_shadowed_sitecustomize_importing_server_args_gets_the_fields(tmp_path, how):
    pytest.importorskip("sglang", reason="needs the real sglang==0.5.23 package")
    other = tmp_path / "other"
    other.mkdir()
    if how == "import":
        body = "import sglang.srt.server_args\n"
    else:  # a .pth file processed by the chained sitecustomize imports it
        site_dir = tmp_path / "site"
        site_dir.mkdir()
        (site_dir / "probe_extra.pth").write_text("import pth_probe\n")
        (site_dir / "pth_probe.py").write_text("import sglang.srt.server_args\n")
        body = f"import site\nsite.addsitedir({str(site_dir)!r})\n"
    (other / "sitecustomize.py").write_text(CHAINED + body)
    facts, stderr = probe([str(other)], tmp_path)
    assert facts["chained"] == 1
    assert facts["fields"] == [
        "speculative_disable_batch_threshold",
        "speculative_disable_hysteresis",
        "speculative_disable_min_dwell_steps",
        "speculative_disable_force_mode",
        "speculative_disable_cold_draft_above",
        "speculative_disable_explore_share",
        "speculative_disable_auto_tune",
    ], stderr[-3000:]
    assert "NOT active" not in stderr, stderr[-3000:]
