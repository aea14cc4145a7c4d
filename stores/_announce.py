"""Turning a commit into signals: what subscribers of a store receive.

For each top-level key whose value changed, in key order:

* ``state:<key>:changed`` ``{key, old, new, actor, paths}``: ``old`` is ``None`` for
  a key the commit created; ``paths`` are the dotted paths that changed inside the
  key (``["analysis.confidence"]``), or ``[key]`` when the value was replaced whole.
* when the key holds a list before and after: ``state:<key>:added`` ``{key, items,
  actor}`` if items were added (the multiset difference new - old), then
  ``state:<key>:removed`` ``{key, items, actor}`` if items were removed (old - new).
  Items compare by value, so reordering a list adds and removes nothing.

Payloads are read-only: the dict refuses mutation, and ``paths``, ``old``, ``new``
and ``items`` are read-only views (``ListView`` for lists, as in every payload).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from reactor._signals.frozen import FrozenDict
from reactor._signals.names import state_event
from reactor._signals.views import SCALARS, ListView, readonly
from stores._diff import changed_paths, list_delta

__all__ = ["ABSENT", "Change", "announce"]

ABSENT: Any = object()
"""The ``old`` value of a key that a commit created."""

Change = tuple[str, Any, Any]
"""One changed key of a commit: ``(key, old, new)``; ``old`` may be :data:`ABSENT`."""

Emit = Callable[..., object]


class _KeySignals(NamedTuple):
    changed: str
    added: str
    removed: str
    whole: ListView  # the paths of a value replaced whole: [key]; immutable, so shared


def announce(emit: Emit, changes: Iterable[Change], actor: str) -> None:
    """Emit the signals of ``changes`` through ``emit`` (a bus's ``emit``)."""
    for key, old, new in changes:
        signals = _signals_of(key)
        # A new key, or a scalar on either side: the value was replaced, not
        # changed inside.
        old_scalar, new_scalar = type(old) in SCALARS, type(new) in SCALARS
        if old is ABSENT or old_scalar or new_scalar:
            paths = signals.whole
        else:
            paths = ListView(changed_paths(old, new, key))
        payload = FrozenDict(
            key=key,
            old=None if old is ABSENT else old if old_scalar else readonly(old),
            new=new if new_scalar else readonly(new),
            actor=actor,
            paths=paths,
        )
        emit(signals.changed, payload, source="store")
        if isinstance(old, list) and isinstance(new, list):
            added, removed = list_delta(old, new)
            if added:
                items = FrozenDict(key=key, items=readonly(added), actor=actor)
                emit(signals.added, items, source="store")
            if removed:
                items = FrozenDict(key=key, items=readonly(removed), actor=actor)
                emit(signals.removed, items, source="store")


@functools.lru_cache(maxsize=4096)
def _signals_of(key: str) -> _KeySignals:
    """The signal names of ``key``: the same for every store, so built once."""
    return _KeySignals(
        state_event(key, "changed"),
        state_event(key, "added"),
        state_event(key, "removed"),
        ListView([key]),
    )
