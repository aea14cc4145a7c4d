"""Building a store from what a run accepts as ``state=``."""

from __future__ import annotations

from typing import Any

import pydantic

from reactor._signals.views import unwrap
from stores._store import Store

__all__ = ["create_store"]


def create_store(spec: Any) -> Store[Any]:
    """Make a store from what a run accepts as ``state=``.

    A :class:`Store` instance is used as is; a ``Store`` subclass, a pydantic model
    class, a model instance or a dict gives a new store (copies of instances); a
    function returning any of these is called first; ``None`` gives an empty dict
    store.

    Raises:
        TypeError: ``spec`` is none of these.
    """
    if isinstance(spec, Store):
        return spec
    if spec is None:
        return Store({})
    if isinstance(spec, type):
        if issubclass(spec, Store):
            return spec()
        if issubclass(spec, pydantic.BaseModel):
            return Store(spec())
    elif isinstance(spec, pydantic.BaseModel | dict) or unwrap(spec) is not spec:
        return Store(spec)
    elif callable(spec):
        made = spec()
        if callable(made) and not isinstance(made, type | Store):
            raise TypeError(f"The state factory {spec!r} returned another callable, {made!r}.")
        return create_store(made)
    raise TypeError(
        f"Cannot make a store from {spec!r}: give a Store subclass or instance, a pydantic "
        "model class or instance, a dict, or a function returning one of these."
    )
