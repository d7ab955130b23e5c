"""Shared set-up for tests against the real sglang==0.5.23 package (marker ``sglang``).

The import hook is installed here, before any test module imports SGLang, exactly as the
bootstrap does in a server process. Nothing here imports SGLang itself: each test module
skips through ``pytest.importorskip`` when sglang is not installed.
"""
from server_control.sglang_patch import hook

hook.install()
