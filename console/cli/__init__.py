"""The `specconsole` command line (entry point ``console.cli:main``)."""

from console.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
