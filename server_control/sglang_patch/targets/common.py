"""``sglang.srt.utils.common``: wrap ``configure_logger`` so a pending ``NOT active`` line
is written with SGLang's format and rank prefix (logging only: in every gate mode)."""

from __future__ import annotations

from typing import Any

from server_control.sglang_patch import gate


def after(module: Any) -> None:
    original = getattr(module, "configure_logger", None)
    if original is None or getattr(original, "_specconsole", False):
        return

    def configure_logger(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        gate.flush()
        return result

    configure_logger._specconsole = True  # type: ignore[attr-defined]
    configure_logger.__wrapped__ = original  # type: ignore[attr-defined]
    configure_logger.__doc__ = original.__doc__
    module.configure_logger = configure_logger
