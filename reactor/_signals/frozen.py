"""Immutable containers for snapshots and signal payloads.

``store.snapshot()`` is memoized per committed version, so the same object is handed
to every caller until the next write; a signal's payload is handed to every
subscriber. These ``dict`` and ``list`` subclasses make that safe: they serialize,
compare and type-check as plain containers, and refuse mutation.
``copy.deepcopy()`` returns plain, mutable containers.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pydantic

from reactor.exceptions import ReadOnlyStateError

__all__ = [
    "FrozenDict",
    "FrozenList",
    "freeze",
    "freeze_payload",
    "register_immutable",
    "thaw",
]

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


_IMMUTABLE: tuple[type[Any], ...] = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
    FrozenDict,
    FrozenList,
)


def register_immutable(kind: type[Any]) -> None:
    """Let payloads hold ``kind`` as is: its instances cannot change (read-only views)."""
    global _IMMUTABLE
    _IMMUTABLE = (*_IMMUTABLE, kind)


def freeze_payload(value: Any) -> Any:
    """A payload nobody can change after it was emitted, the emitter included.

    Dicts and lists become their frozen twins (recursively), tuples and sets are
    rebuilt around frozen items, and a pydantic model is copied: the emitter keeps the
    original, subscribers and the log get a value of their own. Immutable values and
    read-only views pass as they are; other objects are assumed not to change.
    """
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, dict):
        frozen = FrozenDict()
        for key, item in value.items():
            dict.__setitem__(frozen, key, freeze_payload(item))
        return frozen
    if isinstance(value, list):
        items = FrozenList()
        list.extend(items, (freeze_payload(item) for item in value))
        return items
    if isinstance(value, tuple):
        return (
            type(value)(*map(freeze_payload, value))
            if hasattr(value, "_fields")
            else tuple(map(freeze_payload, value))
        )
    if isinstance(value, set | frozenset):
        return frozenset(map(freeze_payload, value))
    if isinstance(value, pydantic.BaseModel):
        return value.model_copy(deep=True)
    return value
