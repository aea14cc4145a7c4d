"""The ``reactor`` command line."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import reactor

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``reactor`` command."""
    parser = argparse.ArgumentParser(
        prog="reactor",
        description="Run, inspect and replay reactive agent graphs.",
    )
    parser.add_argument("--version", action="version", version=f"reactor {reactor.__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``reactor`` console script; returns the exit status."""
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0
