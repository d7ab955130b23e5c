"""Tolerant readers of JSON values (a value of the wrong type becomes None or empty, never
an exception): how the typed snapshot reads a remote member's `status --json`."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def _int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return None
    return int(v)


def _num(v: object) -> float | int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return None
    return v


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _bool(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


def _obj(v: object) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: object) -> list[Any]:
    return v if isinstance(v, list) else []


def _counts(v: object) -> Mapping[str, float]:
    return MappingProxyType({k: x for k, x in _obj(v).items() if isinstance(k, str) and _num(x) is not None})
