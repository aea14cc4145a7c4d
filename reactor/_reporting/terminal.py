"""Text for a terminal: control characters escaped, and rich when it can draw."""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["clean", "rich_console"]

_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def clean(value: object, *, newlines: bool = False) -> str:
    r"""``str(value)`` with control characters escaped (ESC prints as ``\x1b``).

    Terminal escape sequences, carriage returns and bidirectional overrides in a
    graph name or a tag would otherwise redraw or reorder what the user reads.
    ``newlines=True`` keeps line breaks (for multi-line text such as a diff).
    """
    text = str(value)
    if text.isprintable():
        return text
    out: list[str] = []
    for char in text:
        if (char == "\n" and newlines) or not (unicodedata.category(char) == "Cc" or char in _BIDI):
            out.append(char)
        else:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return "".join(out)


def rich_console(stream: TextIO, *, plain: bool = False) -> Console | None:
    """A rich console on ``stream`` if rich is installed and ``stream`` is a terminal."""
    if plain:
        return None
    try:
        from rich.console import Console
    except ImportError:  # the `cli` extra is not installed: plain text
        return None
    console = Console(file=stream, highlight=False, emoji=False, markup=False)
    return console if console.is_terminal else None
