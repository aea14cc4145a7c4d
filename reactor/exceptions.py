"""Every error reactor raises, under one root.

Catch :class:`ReactorError` to handle anything the library raises on purpose. Each
leaf also subclasses the builtin it resembles, so code that already catches
``ValueError`` or ``TypeError`` keeps working::

    ReactorError
    ├── HandlerError(TypeError)           a callable cannot be used as a signal handler
    ├── PatternError(ValueError)          a signal pattern cannot be compiled
    └── SignalNameError(ValueError)       a signal name is malformed

Messages are whole sentences that say what went wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "HandlerError",
    "PatternError",
    "ReactorError",
    "SignalNameError",
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
