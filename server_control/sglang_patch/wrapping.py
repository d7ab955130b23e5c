"""Replace methods of an SGLang class by wrappers that keep the original reachable."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def wrap_methods(cls: type, pairs: Iterable[tuple[Callable[..., object], Callable[..., object]]]) -> None:
    """``pairs``: (wrapper, original) functions. Each wrapper takes the original's name,
    docstring and qualified name, and ``__wrapped__`` points at the original. Marks the
    class patched (``_specconsole_patched``) so a second call can be skipped."""
    for new, old in pairs:
        new.__wrapped__ = old  # type: ignore[attr-defined]
        new.__doc__ = old.__doc__
        new.__qualname__ = old.__qualname__
        setattr(cls, old.__name__, new)
    cls._specconsole_patched = True  # type: ignore[attr-defined]
