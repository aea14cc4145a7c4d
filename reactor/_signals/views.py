"""Read-only views over committed state.

Everything a store hands out (``store.state``, ``store.get()``, the ``old`` and
``new`` of its signals) is the committed object itself behind a thin proxy that
refuses mutation. Handing out views costs O(1) and no copying, and since committed
objects are never mutated in place (writes go through copy-on-write drafts), a view
stays exactly what it was when it was taken.

A view of a pydantic model passes ``isinstance`` checks for the model, so guards and
templates read it the same way as the model.
"""

from __future__ import annotations

import copy
import datetime as dt
import decimal
import enum
import inspect
import types
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NoReturn

import pydantic

from reactor._signals.signal import register_json_unwrapper
from reactor.exceptions import ReadOnlyStateError

__all__ = ["DictView", "ListView", "ModelView", "is_view", "readonly", "unwrap"]

SCALARS: frozenset[type[Any]] = frozenset(
    {
        str,
        int,
        float,
        bool,
        type(None),
        bytes,
        complex,
        decimal.Decimal,
        dt.datetime,
        dt.date,
        dt.time,
        dt.timedelta,
        uuid.UUID,
    }
)

_ADVICE = (
    "State read from a store is read-only. Change it through an @action, "
    "store.set(), store.update() or `with store.transaction() as draft:`."
)


# Views refuse attribute writes and answer attribute reads themselves.
_set = object.__setattr__
_get = object.__getattribute__


def _refuse(what: str) -> NoReturn:
    raise ReadOnlyStateError(f"Cannot {what}: {_ADVICE}")


def readonly(value: Any) -> Any:
    """Return ``value`` if immutable, else a read-only view of it."""
    kind = type(value)
    if kind in SCALARS or kind in _VIEWS:
        return value
    if isinstance(value, pydantic.BaseModel):
        return ModelView(value)
    if isinstance(value, dict):
        return DictView(value)
    if isinstance(value, list):
        return ListView(value)
    if kind is tuple:
        return tuple(readonly(item) for item in value)
    if isinstance(value, set):
        return frozenset(value)
    if isinstance(value, enum.Enum):
        return value
    return value


def unwrap(value: Any) -> Any:
    """Replace views, at any depth of lists, dicts and tuples, by what they show."""
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind in _VIEWS:
        return value._target
    if kind is list:
        items = [unwrap(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if kind is dict:
        entries = {key: unwrap(item) for key, item in value.items()}
        return value if all(entries[k] is v for k, v in value.items()) else entries
    if kind is tuple:
        return tuple(unwrap(item) for item in value)
    return value


def is_view(value: object) -> bool:
    """Return whether ``value`` is a read-only state view."""
    return type(value) in _VIEWS


class ModelView:
    """Read-only proxy of a pydantic model instance.

    Fields read as views, methods and properties run against the view (so they cannot
    mutate either), and pydantic's own API (``model_dump``, ...) reads the model.
    ``copy.deepcopy(view)`` returns a private, mutable copy of the model.

    Guards and templates read fields on every evaluation, so field reads are the fast
    path: each field's read-only value is made on its first read and kept in
    ``_views`` (the committed model never changes, so neither does what it shows),
    and later reads find it before any other lookup.
    """

    __slots__ = ("_target", "_views")

    _target: pydantic.BaseModel
    _views: dict[str, Any]

    def __init__(self, target: pydantic.BaseModel) -> None:
        _set(self, "_target", target)
        _set(self, "_views", {})

    @property  # type: ignore[misc]  # a view passes isinstance() for its model
    def __class__(self) -> type[Any]:
        return type(self._target)

    def __getattribute__(self, name: str) -> Any:
        views = _get(self, "_views")
        if name in views:
            return views[name]
        target = _get(self, "_target")
        fields = target.__dict__
        if name in fields:
            view = views[name] = readonly(fields[name])
            return view
        if name in _VIEW_ATTRIBUTES:
            return object.__getattribute__(self, name)
        return _model_attribute(self, target, name)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        _refuse(f"set {type(self._target).__name__}.{name}")

    def __delattr__(self, name: str) -> NoReturn:
        _refuse(f"delete {type(self._target).__name__}.{name}")

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for name, value in self._target:
            yield name, readonly(value)

    def __eq__(self, other: object) -> bool:
        return bool(self._target == unwrap(other))

    def __hash__(self) -> int:
        return hash(self._target)

    def __repr__(self) -> str:
        return repr(self._target)

    def __str__(self) -> str:
        return str(self._target)

    def __dir__(self) -> list[str]:
        return dir(self._target)

    def __copy__(self) -> pydantic.BaseModel:
        return self._target.model_copy(deep=True)

    def __deepcopy__(self, memo: dict[int, Any]) -> pydantic.BaseModel:
        return self._target.model_copy(deep=True)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return self._target.__reduce_ex__(protocol)


_VIEW_ATTRIBUTES = frozenset(dir(ModelView))
"""What a view answers itself (its slots, methods and ``object``'s); the rest is the model's."""


def _model_attribute(view: ModelView, target: pydantic.BaseModel, name: str) -> Any:
    """Read an attribute of the model that is not a field, keeping it read-only."""
    extra = target.__pydantic_extra__
    if extra and name in extra:
        return readonly(extra[name])
    attr = inspect.getattr_static(type(target), name, None)
    if isinstance(attr, property) and attr.fget is not None:
        return readonly(attr.fget(view))
    if name == "model_copy":
        return _deep_model_copy(target)
    if isinstance(attr, types.FunctionType) and not name.startswith(("model_", "__")):
        return types.MethodType(attr, view)
    return getattr(target, name)


def _deep_model_copy(target: pydantic.BaseModel) -> Any:
    def model_copy(*, update: Mapping[str, Any] | None = None, deep: bool = True) -> Any:
        """Return a private, mutable copy (always deep: the original is shared state)."""
        return target.model_copy(update=update, deep=True)

    return model_copy


class DictView(Mapping[str, Any]):
    """Read-only mapping over a dict; keys also read as attributes (``state.balance``)."""

    __slots__ = ("_target",)

    _target: dict[str, Any]

    def __init__(self, target: dict[str, Any]) -> None:
        _set(self, "_target", target)

    def __getitem__(self, key: str) -> Any:
        return readonly(self._target[key])

    def __getattr__(self, name: str) -> Any:
        target = self._target
        if name in target:
            return readonly(target[name])
        if name.startswith("__"):
            raise AttributeError(name)
        keys = ", ".join(map(str, target)) or "none"
        raise AttributeError(f"The state has no key {name!r} (keys: {keys}).")

    def __iter__(self) -> Iterator[str]:
        return iter(self._target)

    def __len__(self) -> int:
        return len(self._target)

    def __contains__(self, key: object) -> bool:
        return key in self._target

    def __eq__(self, other: object) -> bool:
        other = unwrap(other)
        if isinstance(other, Mapping):
            return self._target == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like dict: mutable elsewhere, unhashable

    def __repr__(self) -> str:
        return repr(self._target)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        _refuse(f"set key {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        _refuse(f"delete key {name!r}")

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        _refuse(f"set key {key!r}")

    def __delitem__(self, key: str) -> NoReturn:
        _refuse(f"delete key {key!r}")

    def pop(self, *args: Any) -> NoReturn:
        """Refused: the mapping is read-only."""
        _refuse("pop from a mapping")

    def popitem(self) -> NoReturn:
        """Refused: the mapping is read-only."""
        _refuse("pop from a mapping")

    def clear(self) -> NoReturn:
        """Refused: the mapping is read-only."""
        _refuse("clear a mapping")

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: the mapping is read-only."""
        _refuse("update a mapping")

    def setdefault(self, *args: Any) -> NoReturn:
        """Refused: the mapping is read-only."""
        _refuse("setdefault on a mapping")

    def __copy__(self) -> dict[str, Any]:
        return copy.deepcopy(self._target)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(self._target, memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (copy.deepcopy(self._target),))


class ListView(Sequence[Any]):
    """Read-only sequence over a list; items read as views."""

    __slots__ = ("_target",)

    _target: list[Any]

    def __init__(self, target: list[Any]) -> None:
        _set(self, "_target", target)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ListView(self._target[index])
        return readonly(self._target[index])

    def __len__(self) -> int:
        return len(self._target)

    def __iter__(self) -> Iterator[Any]:
        for item in self._target:
            yield readonly(item)

    def __contains__(self, item: object) -> bool:
        return unwrap(item) in self._target

    def __eq__(self, other: object) -> bool:
        other = unwrap(other)
        if isinstance(other, list):
            return self._target == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like list: unhashable

    def __add__(self, other: Sequence[Any]) -> list[Any]:
        return [*self, *other]

    def __repr__(self) -> str:
        return repr(self._target)

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        _refuse(f"set attribute {name!r} of a list")

    def __setitem__(self, index: Any, value: Any) -> NoReturn:
        _refuse("assign to a list item")

    def __delitem__(self, index: Any) -> NoReturn:
        _refuse("delete a list item")

    def __iadd__(self, other: Any) -> NoReturn:  # type: ignore[misc]  # refuses, by design
        _refuse("extend a list")

    def __imul__(self, other: Any) -> NoReturn:
        _refuse("repeat a list in place")

    def append(self, item: Any) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("append to a list")

    def extend(self, items: Any) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("extend a list")

    def insert(self, index: int, item: Any) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("insert into a list")

    def pop(self, index: int = -1) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("pop from a list")

    def remove(self, item: Any) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("remove from a list")

    def clear(self) -> NoReturn:
        """Refused: the list is read-only."""
        _refuse("clear a list")

    def sort(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: the list is read-only (``sorted(view)`` returns a new list)."""
        _refuse("sort a list in place")

    def reverse(self) -> NoReturn:
        """Refused: the list is read-only (``reversed(view)`` iterates backwards)."""
        _refuse("reverse a list in place")

    def __copy__(self) -> list[Any]:
        return copy.deepcopy(self._target)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return copy.deepcopy(self._target, memo)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (copy.deepcopy(self._target),))


_VIEWS: frozenset[type[Any]] = frozenset({ModelView, DictView, ListView})

for _view in _VIEWS:
    register_json_unwrapper(_view, lambda view: view._target)
