"""What changed between two committed values: dotted paths, and list growth."""

from __future__ import annotations

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


def list_delta(old: Any, new: Any) -> tuple[str, list[Any]] | None:
    """Describe how a list grew or shrank: ``("added" | "removed", items)`` or ``None``.

    Items are matched in order first (appends, pops and removals are found in one
    pass); if the lists do not line up, by equality as a multiset.
    """
    if not (isinstance(old, list) and isinstance(new, list)) or len(old) == len(new):
        return None
    if len(new) > len(old):
        return "added", _extra(old, new)
    return "removed", _extra(new, old)


def _extra(short: list[Any], long: list[Any]) -> list[Any]:
    """Return the items of ``long`` that ``short`` does not account for."""
    if long[: len(short)] == short:
        return long[len(short) :]
    extra: list[Any] = []
    i = 0
    for item in long:
        if i < len(short) and (item is short[i] or item == short[i]):
            i += 1
        else:
            extra.append(item)
    if i == len(short):
        return extra
    remaining = list(short)
    extra = []
    for item in long:
        for index, candidate in enumerate(remaining):
            if candidate is item or candidate == item:
                del remaining[index]
                break
        else:
            extra.append(item)
    return extra
