from __future__ import annotations

import inspect

import migration
import migration._expressions.errors
from reactor import ReactorError

ERRORS = [
    value
    for name in migration.__all__
    if inspect.isclass(value := getattr(migration, name)) and issubclass(value, Exception)
]


def test_every_error_descends_from_reactor_error_and_a_builtin() -> None:
    assert {e.__name__ for e in ERRORS} == set(migration._expressions.errors.__all__)
    for error in ERRORS:
        assert issubclass(error, ReactorError)
        builtin = [base for base in error.__mro__ if base.__module__ == "builtins"]
        assert builtin[0] is not Exception, f"{error.__name__} has no builtin peer"
        assert error.__name__ in (migration._expressions.errors.__doc__ or "")
