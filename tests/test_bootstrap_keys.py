"""The patched-SGLang bootstrap moves API keys from the environment to sys.argv in the
launch_server process that `serve` marked, so they are never on a command line and the
processes SGLang spawns do not inherit them. Real interpreter, real sitecustomize."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from server_control.sglang_patch import serve

PROBE = (
    "import json, os, sys, subprocess; "
    "child = subprocess.run([sys.executable, '-c', 'import os; print(os.environ.get(\"SPECCONSOLE_API_KEY\"))'], "
    "capture_output=True, text=True).stdout.strip(); "
    "print(json.dumps([sys.argv[1:], os.environ.get('SPECCONSOLE_API_KEY'), child]))"
)


def run_probe(**extra) -> list:
    env = serve.patched_env({k: v for k, v in os.environ.items() if not k.startswith("SPECCONSOLE_")})
    env.update(extra)
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_serve_main_process_takes_the_key_into_argv_and_out_of_the_environment():
    argv, own_env, child_env = run_probe(SPECCONSOLE_SERVE_MAIN="1", SPECCONSOLE_API_KEY="sk-9")
    assert argv == ["--api-key", "sk-9"]
    assert own_env is None and child_env == "None"


def test_other_processes_leave_the_environment_alone():
    argv, own_env, _ = run_probe(SPECCONSOLE_API_KEY="sk-9")
    assert argv == [] and own_env == "sk-9"
