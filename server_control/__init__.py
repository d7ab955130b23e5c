"""Everything without a screen, in layers (each package imports only those below it; the
contracts are in pyproject.toml [tool.importlinter], docs/architecture.md draws them):
fleet > session > supervision > control > telemetry > logs > proc > config > state > model >
protocol | sanitize. ``sim`` and ``sglang_patch`` import only ``protocol``. Loose modules:
``keeper`` (the ``python -m server_control.keeper`` entry), ``loadgen``, ``sanitize``.
Never imports console, textual or rich."""
