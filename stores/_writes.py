"""What a write is made of: the keys a dict draft wrote, copies, and key names."""

from __future__ import annotations

import copy
from typing import Any

from reactor._signals.patterns import validate_name
from reactor._signals.views import SCALARS
from reactor.exceptions import SignalNameError, StoreError
from stores._draft import DictDraft

__all__ = ["assign", "check_key", "copied", "dict_updates"]


def dict_updates(draft: DictDraft) -> dict[str, Any]:
    """Return the keys a dict draft wrote, with their finalized values."""
    finalized, base = draft._finalize(), draft._base
    if finalized is base:
        return {}
    deleted = [key for key in base if key not in finalized]
    if deleted:
        raise StoreError(
            f"Cannot delete top-level key {deleted[0]!r}: a store's keys are its "
            "schema. Set the key to None instead."
        )
    updates = {k: v for k, v in finalized.items() if k not in base or v is not base[k]}
    for key in updates.keys() - base.keys():
        check_key(key)
    return updates


def copied(value: Any) -> Any:
    """A deep copy of a dict state: plain data copied directly, anything else deep-copied."""
    kind = type(value)
    if kind in SCALARS:
        return value
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    return copy.deepcopy(value)


def assign(draft: Any, key: str, value: Any) -> None:
    if isinstance(draft, DictDraft):
        draft[key] = value
    else:
        setattr(draft, key, value)


def check_key(key: object) -> None:
    if not isinstance(key, str) or ":" in key:
        raise SignalNameError(
            f"State key {key!r} cannot be part of a signal name: keys are strings without "
            "':' (each key emits state:<key>:changed).",
            name=key,
        )
    validate_name(key)
