"""The errors of the state stores (re-exported by :mod:`reactor.exceptions`)."""

from __future__ import annotations

from reactor.exceptions._engine import ReactorError

__all__ = [
    "ReadOnlyStateError",
    "StateKeyError",
    "StateValidationError",
    "StoreError",
    "TransactionError",
]


class StoreError(ReactorError):
    """A state store refused an operation; the state is unchanged."""


class ReadOnlyStateError(StoreError, TypeError):
    """State read from a store (``store.state``, payloads, snapshots) was mutated.

    Reads are read-only so that nothing can change the state behind the store's back
    (and without a signal). Write through an ``@action``, ``store.set()``,
    ``store.update()`` or ``store.transaction()``.
    """


class StateKeyError(StoreError, KeyError):
    """The state has no such key.

    Attributes:
        key: The key asked for.
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key

    def __str__(self) -> str:
        return str(self.args[0])


class StateValidationError(StoreError, ValueError):
    """A write does not validate against the state model; nothing was changed.

    Attributes:
        key: The top-level state key the failing value belongs to.
        path: The dotted path of the first invalid value (``analysis.confidence``).
        errors: pydantic's error list, for programmatic inspection.
    """

    def __init__(
        self, message: str, *, key: str, path: str, errors: list[dict[str, object]]
    ) -> None:
        super().__init__(message)
        self.key = key
        self.path = path
        self.errors = errors


class TransactionError(StoreError, RuntimeError):
    """A transaction cannot commit (a nested write failed) or a store cannot be bound."""
