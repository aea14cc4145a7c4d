"""``@action``: store methods that write through a draft, as one transaction."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from stores._store import Store
from stores._transaction import Transaction

__all__ = ["action"]

StoreT = TypeVar("StoreT", bound=Store[Any])
DraftT = TypeVar("DraftT")
P = ParamSpec("P")
R = TypeVar("R")


def action(
    method: Callable[Concatenate[StoreT, DraftT, P], R],
) -> Callable[Concatenate[StoreT, P], R]:
    """Make a store method a transactional action that receives a mutable draft.

    Callers omit the draft: ``store.record_analysis(a)`` runs
    ``record_analysis(store, draft, a)`` in a transaction and commits (validated,
    atomic, then signalled) when it returns. ``async def`` actions work too; the
    transaction spans their awaits.
    """
    if inspect.iscoroutinefunction(method):

        @functools.wraps(method)
        async def run_async(self: StoreT, /, *args: P.args, **kwargs: P.kwargs) -> Any:
            transaction: Transaction[DraftT] = Transaction(self, None)
            with transaction as draft:
                return await method(self, draft, *args, **kwargs)

        return cast(Callable[Concatenate[StoreT, P], R], run_async)

    @functools.wraps(method)
    def run(self: StoreT, /, *args: P.args, **kwargs: P.kwargs) -> R:
        transaction: Transaction[DraftT] = Transaction(self, None)
        with transaction as draft:
            return method(self, draft, *args, **kwargs)

    return run
