"""``sglang.srt.utils.common``: wrap ``configure_logger`` so a pending ``NOT active`` line
is written with SGLang's format and rank prefix (logging only: in every gate mode)."""

from __future__ import annotations

from server_control.sglang_patch import gate
from server_control.sglang_patch.sglang_shapes import UtilsCommonModule


def after(module: UtilsCommonModule) -> None:
    original = getattr(module, "configure_logger", None)
    if original is None or getattr(original, "_specconsole", False):
        return

    def configure_logger(*args: object, **kwargs: object) -> object:
        result = original(*args, **kwargs)
        gate.flush()
        return result

    configure_logger._specconsole = True  # type: ignore[attr-defined]
    configure_logger.__wrapped__ = original  # type: ignore[attr-defined]
    configure_logger.__doc__ = original.__doc__
    module.configure_logger = configure_logger
