"""A module (or a name inside one) imported when a test first reads from it, not when pytest
collects the test's module.

Every xdist worker imports every test module to collect it, then runs only its share. A
module that imports torch (~2 CPU-s) or transformers (~1.4) at its top made each of the fast
loop's five workers pay for tests one worker runs (``tests/test_collection_imports.py``
keeps the fast loop's test modules free of such imports at collection)."""

from __future__ import annotations

import functools
import importlib
from typing import Any


class Lazy:
    """Stands for module ``module`` (or the object at dotted ``path`` inside it): reading an
    attribute imports the module (once; Python caches it) and reads from the real object."""

    __slots__ = ("_module", "_path")

    def __init__(self, module: str, path: str = "") -> None:
        self._module = module
        self._path = path

    def _target(self) -> Any:
        return functools.reduce(getattr, filter(None, self._path.split(".")), importlib.import_module(self._module))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):  # pytest's collection asks each module global for
            raise AttributeError(attr)  # ``__test__`` and the like: no import for that
        return getattr(self._target(), attr)

    def __repr__(self) -> str:
        return f"<lazy {self._module}{'.' + self._path if self._path else ''}>"


def lazy(module: str, path: str = "") -> Any:  # Any: reads as what it stands for
    return Lazy(module, path)
