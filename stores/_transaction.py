"""Transactions: a draft of the state, committed on a clean exit, nested ones joined."""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar, cast

from reactor.exceptions import TransactionError
from stores._actor import _ACTOR

__all__ = ["Transaction", "Transactional", "in_transaction", "writer"]

StateT = TypeVar("StateT")


class Transactional(Protocol):
    """What a transaction needs from its store: a draft to write, and a commit."""

    def _draft(self) -> Any:
        """Return a fresh copy-on-write draft of the committed state."""

    def _commit(self, draft: Any, actor: str) -> None:
        """Validate ``draft``, make it the committed state and signal the changes."""


_ACTIVE: contextvars.ContextVar[tuple[Transaction[Any], ...]] = contextvars.ContextVar(
    "stores_active_transactions", default=()
)
"""The transactions open in this context (a nested one on the same store joins)."""


def in_transaction(store: object) -> bool:
    """Whether a transaction on ``store`` is open in this context (a write joins it)."""
    active = _ACTIVE.get()
    return bool(active) and any(open_one._store is store for open_one in active)


def writer(actor: str | None) -> str:
    """Who a write is attributed to: its ``actor=``, else the context's, else the user."""
    return actor or _ACTOR.get() or "user"


class Transaction(Generic[StateT]):
    """The context manager returned by :meth:`Store.transaction`; yields the draft."""

    __slots__ = ("_actor", "_draft", "_failure", "_outer", "_store", "_token")

    _draft: Any
    _token: contextvars.Token[tuple[Transaction[Any], ...]]

    def __init__(self, store: Transactional, actor: str | None) -> None:
        self._store = store
        self._actor = actor
        self._outer: Transaction[Any] | None = None
        self._failure: BaseException | None = None

    def __enter__(self) -> StateT:
        active = _ACTIVE.get()
        for outer in active:
            if outer._store is self._store:
                self._outer = outer
                return cast(StateT, outer._draft)
        self._draft = self._store._draft()
        self._token = _ACTIVE.set((*active, self))
        return cast(StateT, self._draft)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._outer is not None:
            if exc is not None and self._outer._failure is None:
                self._outer._failure = exc
            return
        _ACTIVE.reset(self._token)
        if exc is not None:
            return
        if self._failure is not None:
            raise TransactionError(
                "The transaction was not committed because a nested write in it failed "
                f"({type(self._failure).__name__}: {self._failure}); the state is "
                "unchanged. Let the error propagate, or catch it outside the transaction."
            ) from self._failure
        self._store._commit(self._draft, writer(self._actor))
