"""Immutable containers for snapshots and signal payloads.

``store.snapshot()`` is memoized per committed version, so the same object is handed
to every caller until the next write: it is made of :class:`FrozenDict` and
:class:`FrozenList`, ``dict`` and ``list`` subclasses that serialize, compare and
type-check as plain containers and refuse mutation.

A signal's payload is handed to every subscriber, and the payloads of state signals
show committed values without copying them. So that one payload never mixes two
kinds of read-only containers, every payload follows one rule: the payload itself is
a read-only ``dict`` (:class:`FrozenDict`), and every list inside it is a
:class:`~reactor._signals.views.ListView` and every mapping a
:class:`~reactor._signals.views.DictView`, the same read-only views ``store.state``
hands out. ``copy.deepcopy()`` of any of them returns plain, mutable containers, and
:meth:`Signal.to_json` writes them as JSON.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pydantic

from reactor._signals.views import DictView, ListView, ModelView
from reactor.exceptions import ReadOnlyStateError

__all__ = [
    "FrozenDict",
    "FrozenList",
    "freeze",
    "freeze_payload",
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
    ModelView,
    DictView,
    ListView,
)


def freeze_payload(value: Any) -> Any:
    """A payload nobody can change after it was emitted, the emitter included.

    A dict becomes a :class:`FrozenDict` whose lists and mappings, at any depth, are
    read-only views over copies of their own (``ListView``, ``DictView``); a list at
    the top becomes a ``ListView``. Tuples and sets are rebuilt around frozen items,
    and a pydantic model is copied: the emitter keeps the original, subscribers and
    the log get a value of their own. Immutable values and read-only views pass as
    they are; other objects are assumed not to change.
    """
    if isinstance(value, dict):
        frozen = FrozenDict()
        for key, item in value.items():
            dict.__setitem__(frozen, key, _nested(item))
        return frozen
    return _nested(value)


def _nested(value: Any) -> Any:
    if isinstance(value, _IMMUTABLE):
        if type(value) is FrozenList:  # a snapshot's list, inside a payload
            return ListView(value)
        if type(value) is FrozenDict:
            return DictView(value)
        return value
    if isinstance(value, dict):
        return DictView({key: _nested(item) for key, item in value.items()})
    if isinstance(value, list):
        return ListView([_nested(item) for item in value])
    if isinstance(value, tuple):
        return (
            type(value)(*map(_nested, value))
            if hasattr(value, "_fields")
            else tuple(map(_nested, value))
        )
    if isinstance(value, set | frozenset):
        return frozenset(map(_nested, value))
    if isinstance(value, pydantic.BaseModel):
        return value.model_copy(deep=True)
    return value
