"""``@action``: store methods that write through a draft, as one transaction."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from reactor._signals.offloop import on_loop
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
    transaction spans their awaits. Called from a sync handler's worker thread, the
    whole action runs on the run's loop, so two threads' actions never lose each
    other's changes.
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
        off = on_loop()
        if off is not None:  # from a sync handler's thread: the whole action on the loop
            return off.call(functools.partial(run, self, *args, **kwargs))
        transaction: Transaction[DraftT] = Transaction(self, None)
        with transaction as draft:
            return method(self, draft, *args, **kwargs)

    return run
