"""Payload dicts that share one table of keys: the engine's own signals, kept small.

Thousands of runs may be in flight, each holding its log: a dict per signal. A dict
made from a literal has a table of its keys of its own (two keys and their values take
184 bytes on CPython 3.11); the attribute dict of an instance shares its class's table
and holds only its values (about 104 bytes). The engine emits the same few payload
shapes over and over (``agent:<name>:activated`` is ``{agent, trigger}`` every time),
so each shape gets a maker of such dicts.

What a maker returns is a plain ``dict`` (``type(d) is dict``): it compares, iterates
in insertion order, copies, pickles and serializes like any other, and a key added
later is simply added. Only its memory is laid out differently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["shared_keys"]


def shared_keys(shape: str) -> Callable[[], dict[str, Any]]:
    """A maker of empty dicts of one payload shape (named as in ``reactor._signals.payloads``).

    Fill each dict it makes with the same keys, in the same order: they then share
    one table of keys. (Its class is one of its own: its instances are never used,
    only the attribute dict each one makes.)
    """
    holder = type(f"SharedKeys[{shape}]", (), {"__module__": __name__})
    new = object.__new__

    def make() -> dict[str, Any]:
        return new(holder).__dict__

    return make
