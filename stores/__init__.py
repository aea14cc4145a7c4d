"""Observable state stores: every change to the state becomes a signal."""

from __future__ import annotations

__all__: list[str] = []
