"""Immutable containers for snapshots and signal payloads.

``store.snapshot()`` is memoized per committed version, so the same object is handed
to every caller until the next write; a signal's payload is handed to every
subscriber. These ``dict`` and ``list`` subclasses make that safe: they serialize,
compare and type-check as plain containers, and refuse mutation.
``copy.deepcopy()`` returns plain, mutable containers.
"""

from __future__ import annotations

from typing import Any, NoReturn

from reactor.exceptions import ReadOnlyStateError

__all__ = ["FrozenDict", "FrozenList", "freeze", "thaw"]

_ADVICE = (
    "Store snapshots and signal payloads are read-only; copy.deepcopy() of one gives a "
    "mutable copy."
)


def _refuse(*args: Any, **kwargs: Any) -> NoReturn:
    raise ReadOnlyStateError(_ADVICE)


class FrozenDict(dict[str, Any]):
    """A ``dict`` that refuses mutation."""

    __slots__ = ()

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (thaw(self),))


class FrozenList(list[Any]):
    """A ``list`` that refuses mutation."""

    __slots__ = ()

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return thaw(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (thaw(self),))


def freeze(value: Any) -> Any:
    """Return JSON data with every dict and list replaced by its frozen twin."""
    if isinstance(value, dict):
        frozen = FrozenDict()
        for key, item in value.items():
            dict.__setitem__(frozen, key, freeze(item))
        return frozen
    if isinstance(value, list):
        items = FrozenList()
        list.extend(items, (freeze(item) for item in value))
        return items
    return value


def thaw(value: Any) -> Any:
    """Return plain, mutable JSON data (the inverse of :func:`freeze`)."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, list):
        return [thaw(item) for item in value]
    return value
