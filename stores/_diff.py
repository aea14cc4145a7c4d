"""What changed between two committed values: dotted paths, and list items."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pydantic

__all__ = ["changed_paths", "list_delta"]


def changed_paths(old: Any, new: Any, path: str) -> list[str]:
    """Return the dotted paths under ``path`` whose values differ.

    Unchanged subtrees are shared between committed versions, so the identity check
    prunes them and the walk only visits what was written.
    """
    if old is new:
        return []
    if isinstance(old, pydantic.BaseModel) and type(old) is type(new):
        found = _mapping_paths(_fields(old), _fields(new), path)
        return found or ([path] if old != new else [])
    if isinstance(old, dict) and isinstance(new, dict):
        return _mapping_paths(old, new, path)
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            found.extend(changed_paths(a, b, f"{path}.{index}"))
        return found
    return [path] if old != new else []


def _fields(model: pydantic.BaseModel) -> dict[str, Any]:
    extra = model.__pydantic_extra__
    return {**model.__dict__, **extra} if extra else model.__dict__


def _mapping_paths(old: dict[str, Any], new: dict[str, Any], path: str) -> list[str]:
    found: list[str] = []
    for key in {**old, **new}:
        child = f"{path}.{key}"
        if key not in old or key not in new:
            found.append(child)
        else:
            found.extend(changed_paths(old[key], new[key], child))
    return found


def list_delta(old: list[Any], new: list[Any]) -> tuple[list[Any], list[Any]]:
    """Return ``(added, removed)``: the multiset differences ``new - old`` and ``old - new``.

    Items are compared by value (pydantic models compare by value), so replacing a
    list reports exactly the items that appeared and those that disappeared, and a
    reordering reports neither. ``added`` keeps the order of ``new``, ``removed`` the
    order of ``old``. Appending to or truncating a list is recognised without
    comparing every pair.
    """
    if len(new) >= len(old) and new[: len(old)] == old:
        return new[len(old) :], []
    if len(old) > len(new) and old[: len(new)] == new:
        return [], old[len(new) :]
    return _unmatched(new, old), _unmatched(old, new)


def _unmatched(items: list[Any], others: list[Any]) -> list[Any]:
    """Return the items of ``items`` that no item of ``others`` pairs with, in order.

    Each item of ``others`` pairs with at most one equal item. Hashable items are
    counted; unhashable ones (dicts, most models) are compared pair by pair.
    """
    try:
        budget = Counter(others)
        unmatched = []
        for item in items:
            if budget[item] > 0:
                budget[item] -= 1
            else:
                unmatched.append(item)
    except TypeError:  # an unhashable item: fall back to comparing pairs
        pass
    else:
        return unmatched
    remaining = list(others)
    unmatched = []
    for item in items:
        for index, candidate in enumerate(remaining):
            if candidate is item or candidate == item:
                del remaining[index]
                break
        else:
            unmatched.append(item)
    return unmatched
