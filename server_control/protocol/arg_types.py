"""The argparse value types of every command line here: the simulator's flags
(protocol/sim_flags.py, also the profile schema's ``[sim]`` keys) and `specconsole`'s own
(console/cli/). One finite-number parser, ``number``, under all of them. Standard library only."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def number(text: str, *, positive: bool = False, unit: str = "", zero: str = "") -> float:
    """A finite number >= 0 (> 0 with ``positive``). The error names the ``unit``
    ("seconds") and what 0 means (``zero``: "0 = do not wait")."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number{' of ' + unit if unit else ''}, got {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0" + (f" ({zero})" if zero else "")
        raise argparse.ArgumentTypeError(f"must be a finite number {bound}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A finite number of seconds >= 0."""
    return number(text, unit="seconds")


def seconds_where(zero: str) -> Callable[[str], float]:
    """A finite number of seconds >= 0 whose 0 means ``zero`` (said in the error)."""

    def parse(text: str) -> float:
        return number(text, unit="seconds", zero=zero)

    parse.__name__ = "seconds"
    return parse


def positive(text: str) -> float:
    """A finite number > 0."""
    return number(text, positive=True)


def positive_seconds(text: str) -> float:
    """A finite number of seconds > 0."""
    return number(text, positive=True, unit="seconds")


def rate(text: str) -> float:
    """A share, 0..1."""
    value = number(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"rate must be between 0 and 1, got {text!r}")
    return value


def int_at_least(lo: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be >= {lo}, got {value}")
        return value

    parse.__name__ = f"int>={lo}"
    return parse


def port_number(text: str) -> int:
    value = int_at_least(0)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port must be 0..65535, got {value}")
    return value


def server_port(text: str) -> int:
    """A port a server listens on: 1..65535 (0 would mean "any")."""
    value = int_at_least(1)(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"port must be 1..65535, got {value}")
    return value


def validated(fn: Callable[[str], T]) -> Callable[[str], T]:
    """``fn``'s ValueError as argparse's error."""

    def parse(text: str) -> T:
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = fn.__name__
    return parse
