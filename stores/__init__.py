"""Observable state stores: every change to the state becomes a signal.

A :class:`Store` holds an application's state (a pydantic model, validated, or a plain
dict). Reads are read-only; writes are transactions that are validated, committed
atomically and then announced as ``state:<key>:changed`` signals (plus
``state:<key>:added`` / ``state:<key>:removed`` when items enter or leave a list) on
a :class:`reactor.SignalBus`, so agents can react to them.
"""

from __future__ import annotations

from reactor.exceptions import (
    ReadOnlyStateError,
    StateKeyError,
    StateValidationError,
    StoreError,
    TransactionError,
)
from stores._action import action
from stores._actor import acting_as, actor_context, current_actor
from stores._create import create_store
from stores._store import Store, StoreBinding, StoreSubscription

__all__ = [
    "ReadOnlyStateError",
    "StateKeyError",
    "StateValidationError",
    "Store",
    "StoreBinding",
    "StoreError",
    "StoreSubscription",
    "TransactionError",
    "acting_as",
    "action",
    "actor_context",
    "create_store",
    "current_actor",
]
