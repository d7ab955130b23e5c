"""One module per SGLang module the patch changes, named like it; hook.py's table maps each
SGLang module name to its target here. Each target has ``after(module)`` (run once the
SGLang module executed) and, where it must act first, ``before()``; each reads the
gate's ``hook.mode()`` itself. Imports only the standard library, SGLang (inside
functions), the rest of ``sglang_patch`` and ``server_control.protocol``."""
