"""The hash chain's hot loop, compiled (``reactor._recording.chain`` is the reference)."""

from collections.abc import Sequence
from typing import Any

def link(
    rows: list[list[Any]], heads: dict[str, tuple[int, str | None]], key: bytes | None
) -> None:
    """Set each row's hash and, in ``heads``, each run's head after them."""

def entry(row: Sequence[Any]) -> bytes:
    """The canonical JSON of a signal's row (its first nine items)."""
