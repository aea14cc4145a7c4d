"""Copy-on-write drafts: the mutable state that actions and transactions write to.

A draft looks like the state (a model draft passes ``isinstance`` for its model) but
copies only what is written: reading ``draft.trades`` wraps the committed list
without copying it; ``draft.trades.append(t)`` copies the list (its item pointers,
not its items); ``draft.trades[3].price = 5`` copies that one item. Finalizing a
draft builds new objects along written paths and shares everything else with the
committed state, which is never mutated in place.

Finalizing a model draft validates the fields written on it (see
:mod:`stores._validation`), so nested writes are validated where they happen and
errors carry their dotted path.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator, MutableMapping, MutableSequence
from typing import Any, NoReturn

import pydantic

from reactor._signals.views import SCALARS, is_view, readonly
from reactor.exceptions import StoreError
from stores._validation import apply_model

__all__ = ["DictDraft", "Draft", "ListDraft", "ModelDraft", "draft_of", "undraft"]

_MISSING: Any = object()

_set = object.__setattr__  # drafts refuse or redirect their own attribute writes


class Draft:
    """Base of the drafts; ``_finalize`` returns the validated result."""

    __slots__ = ("_base", "_path")

    _base: Any
    _path: str

    def _finalize(self) -> Any:
        raise NotImplementedError

    def _peek(self) -> Any:
        """Return the current value without validating (for reads such as ``==``)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return bool(self._peek() == _peek(other))

    __hash__ = None  # type: ignore[assignment]  # drafts are mutable

    def __repr__(self) -> str:
        return repr(self._peek())


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


def draft_of(value: Any, path: str) -> Any:
    """Wrap a mutable container in a draft; return immutable values unchanged."""
    kind = type(value)
    if kind in SCALARS or isinstance(value, Draft):
        return value
    if isinstance(value, pydantic.BaseModel):
        return ModelDraft(value, path)
    if isinstance(value, dict):
        return DictDraft(value, path)
    if isinstance(value, list):
        return ListDraft(value, path)
    if kind is tuple:
        return tuple(readonly(item) for item in value)
    return value


def undraft(value: Any) -> Any:
    """Turn a value being written into plain state: finalize drafts, unwrap views."""
    kind = type(value)
    if kind in SCALARS:
        return value
    if isinstance(value, Draft):
        return value._finalize()
    if is_view(value):
        return value._target
    if kind is list:
        return [undraft(item) for item in value]
    if kind is dict:
        return {key: undraft(item) for key, item in value.items()}
    if kind is tuple:
        return tuple(undraft(item) for item in value)
    return value


def _peek(value: Any) -> Any:
    return value._peek() if isinstance(value, Draft) else value


class ModelDraft(Draft):
    """Draft of a pydantic model.

    ``_writes`` holds, per field, the value written or the draft of a container that
    was read (and may be changed through it); unread fields are the committed ones.
    """

    __slots__ = ("_writes",)

    _writes: dict[str, Any]

    def __init__(self, base: pydantic.BaseModel, path: str) -> None:
        _set(self, "_base", base)
        _set(self, "_path", path)
        _set(self, "_writes", {})

    @property  # type: ignore[misc]  # a draft passes isinstance() for its model
    def __class__(self) -> type[Any]:
        return type(self._base)

    def _committed(self, name: str) -> Any:
        base = self._base
        if name in base.__dict__:
            return base.__dict__[name]
        extra = base.__pydantic_extra__
        if extra is not None and name in extra:
            return extra[name]
        return _MISSING

    def __getattr__(self, name: str) -> Any:
        writes = self._writes
        value = writes[name] if name in writes else self._committed(name)
        if value is not _MISSING:
            child = draft_of(value, _join(self._path, name))
            if isinstance(child, Draft):
                writes[name] = child
            return child
        attr = inspect.getattr_static(type(self._base), name, None)
        if isinstance(attr, property) and attr.fget is not None:
            return attr.fget(self)
        if isinstance(attr, types.FunctionType) and not name.startswith(("model_", "__")):
            return types.MethodType(attr, self)
        return getattr(self._peek(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._writes[name] = undraft(value)

    def __delattr__(self, name: str) -> NoReturn:
        raise StoreError(
            f"Cannot delete field {name!r} of {type(self._base).__name__}; "
            "assign a value (for example None) instead."
        )

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        for name in self._peek().__dict__:
            yield name, getattr(self, name)

    def _updates(self) -> dict[str, Any]:
        """Return the fields written (directly or through a child draft), finalized."""
        updates = {}
        for name, value in self._writes.items():
            if isinstance(value, Draft):
                value = value._finalize()
                if value is self._committed(name):
                    continue  # only read
            updates[name] = value
        return updates

    def _finalize(self) -> Any:
        updates = self._updates()
        return apply_model(self._base, updates, self._path) if updates else self._base

    def _peek(self) -> Any:
        updates = {name: _peek(value) for name, value in self._writes.items()}
        return self._base.model_copy(update=updates) if updates else self._base


class ListDraft(Draft, MutableSequence[Any]):
    """Draft of a list: copies its item pointers on the first write."""

    __slots__ = ("_items",)

    _items: list[Any] | None

    def __init__(self, base: list[Any], path: str) -> None:
        self._base = base
        self._path = path
        self._items = None

    def _own(self) -> list[Any]:
        if self._items is None:
            self._items = list(self._base)
        return self._items

    def _current(self) -> list[Any]:
        return self._items if self._items is not None else self._base

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        value = self._current()[index]
        if type(value) in SCALARS or isinstance(value, Draft):
            return value
        child = draft_of(value, _join(self._path, index % len(self)))
        if isinstance(child, Draft):
            self._own()[index] = child
        return child

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            self._own()[index] = [undraft(item) for item in value]
        else:
            self._own()[index] = undraft(value)

    def __delitem__(self, index: Any) -> None:
        del self._own()[index]

    def __len__(self) -> int:
        return len(self._current())

    def __iter__(self) -> Iterator[Any]:
        for index in range(len(self)):
            yield self[index]

    def __contains__(self, item: object) -> bool:
        return undraft(item) in self._peek()

    def insert(self, index: int, value: Any) -> None:
        """Insert ``value`` before ``index``."""
        self._own().insert(index, undraft(value))

    def append(self, value: Any) -> None:
        """Append ``value``."""
        self._own().append(undraft(value))

    def extend(self, values: Any) -> None:
        """Append every item of ``values``."""
        self._own().extend(undraft(value) for value in values)

    def clear(self) -> None:
        """Remove every item."""
        self._own().clear()

    def sort(self, *, key: Any = None, reverse: bool = False) -> None:
        """Sort in place (``key`` receives the items as drafts or values)."""
        self._own().sort(key=key or _peek, reverse=reverse)

    def reverse(self) -> None:
        """Reverse in place."""
        self._own().reverse()

    def _finalize(self) -> Any:
        items = self._items
        if items is None:
            return self._base
        new = [item._finalize() if isinstance(item, Draft) else item for item in items]
        base = self._base
        if len(new) == len(base) and all(a is b for a, b in zip(new, base, strict=True)):
            return base
        return new

    def _peek(self) -> Any:
        return [_peek(item) for item in self._current()]


class DictDraft(Draft, MutableMapping[str, Any]):
    """Draft of a dict; keys also read and write as attributes (``draft.balance``)."""

    __slots__ = ("_items",)

    _items: dict[str, Any] | None

    def __init__(self, base: dict[str, Any], path: str) -> None:
        _set(self, "_base", base)
        _set(self, "_path", path)
        _set(self, "_items", None)

    def _own(self) -> dict[str, Any]:
        if self._items is None:
            _set(self, "_items", dict(self._base))
        assert self._items is not None
        return self._items

    def _current(self) -> dict[str, Any]:
        return self._items if self._items is not None else self._base

    def __getitem__(self, key: str) -> Any:
        value = self._current()[key]
        if type(value) in SCALARS or isinstance(value, Draft):
            return value
        child = draft_of(value, _join(self._path, key))
        if isinstance(child, Draft):
            self._own()[key] = child
        return child

    def __setitem__(self, key: str, value: Any) -> None:
        self._own()[key] = undraft(value)

    def __delitem__(self, key: str) -> None:
        del self._own()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __contains__(self, key: object) -> bool:
        return key in self._current()

    def __getattr__(self, name: str) -> Any:
        if name in self._current():
            return self[name]
        if name.startswith("__"):
            raise AttributeError(name)
        keys = ", ".join(map(str, self._current())) or "none"
        raise AttributeError(f"The state has no key {name!r} (keys: {keys}).")

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        del self[name]

    def _finalize(self) -> Any:
        items = self._items
        if items is None:
            return self._base
        new = {key: _finalize(value) for key, value in items.items()}
        base = self._base
        if new.keys() == base.keys() and all(new[k] is base[k] for k in base):
            return base
        return new

    def _peek(self) -> Any:
        return {key: _peek(value) for key, value in self._current().items()}


def _finalize(value: Any) -> Any:
    return value._finalize() if isinstance(value, Draft) else value
