"""The code that runs inside SGLang 0.5.23 processes: dynamic speculation disable.

Loaded by the bootstrap ``sitecustomize`` (``bootstrap/``) that
``python -m server_control.sglang_patch.serve`` puts first on PYTHONPATH. Imports only
the standard library, SGLang and ``server_control.protocol`` (the wire contract it shares
with the simulator); nothing here imports SGLang at package import time. See docs/sglang-patch.md.
"""
