"""Every error reactor raises, under one root.

Catch :class:`ReactorError` to handle anything the library raises on purpose. Each
leaf also subclasses the builtin it resembles, so code that already catches
``ValueError`` or ``TypeError`` keeps working::

    ReactorError
    ├── HandlerError(TypeError)           a callable cannot be used as a signal handler
    ├── PatternError(ValueError)          a signal pattern cannot be compiled
    ├── SignalNameError(ValueError)       a signal name is malformed
    └── StoreError                        a state store refused an operation
        ├── ReadOnlyStateError(TypeError)     state read from a store was mutated
        ├── StateKeyError(KeyError)           the state has no such key
        ├── StateValidationError(ValueError)  a write does not validate; nothing changed
        └── TransactionError(RuntimeError)    a transaction cannot commit or bind

Messages are whole sentences that say what went wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "HandlerError",
    "PatternError",
    "ReactorError",
    "ReadOnlyStateError",
    "SignalNameError",
    "StateKeyError",
    "StateValidationError",
    "StoreError",
    "TransactionError",
]


class ReactorError(Exception):
    """Root of every error raised by reactor."""


class HandlerError(ReactorError, TypeError):
    """A callable cannot be used as a signal handler (for example, it is async)."""


class PatternError(ReactorError, ValueError):
    """A signal pattern is malformed.

    Raised when a subscription is made (never at dispatch), so a typo in
    ``activate_on`` surfaces where the agent or handler is defined.

    Attributes:
        pattern: The offending pattern, as given.
    """

    def __init__(self, message: str, *, pattern: object = None) -> None:
        super().__init__(message)
        self.pattern = pattern


class SignalNameError(ReactorError, ValueError):
    """A signal name is malformed (empty, an empty segment, whitespace or ``*``).

    Attributes:
        name: The offending name, as given.
    """

    def __init__(self, message: str, *, name: object = None) -> None:
        super().__init__(message)
        self.name = name


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
