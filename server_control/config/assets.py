"""Locate the shipped assets (example profiles, stylesheet, demo data).

In a source checkout or editable install they sit in ``assets/`` beside the packages;
in a regular install they are data files under ``<prefix>/share/specconsole/assets``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def assets_dir() -> Path:
    here = Path(__file__).resolve().parents[2] / "assets"
    if here.is_dir():
        return here
    for prefix in (sys.prefix, sys.base_prefix):
        candidate = Path(prefix) / "share" / "specconsole" / "assets"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("specconsole assets not found (looked beside the package and in <prefix>/share/specconsole)")


def profile_path(name: str) -> Path:
    """Path of a shipped example profile, e.g. ``profile_path("demo")``."""
    return assets_dir() / "profiles" / (name if name.endswith(".toml") else f"{name}.toml")
