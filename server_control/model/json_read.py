"""Tolerant readers of JSON values (a value of the wrong type becomes None or empty, never
an exception): how the typed values of model/ read JSON (a remote member's `status --json`,
the server's answers). Public: every module that reads JSON tolerantly uses these."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any


def as_int(v: object) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return None
    return int(v)


def as_num(v: object) -> float | int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        return None
    return v


def as_str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def as_bool(v: object) -> bool | None:
    return v if isinstance(v, bool) else None


def as_obj(v: object) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def as_list(v: object) -> list[Any]:
    return v if isinstance(v, list) else []


def as_counts(v: object) -> Mapping[str, float]:
    return MappingProxyType({k: x for k, x in as_obj(v).items() if isinstance(k, str) and as_num(x) is not None})
