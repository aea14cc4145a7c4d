"""Migration from edge-based (nodes + edges) harnesses to reactive graphs."""

from __future__ import annotations

__all__: list[str] = []
