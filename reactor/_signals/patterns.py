"""Signal names and the glob language that matches them.

A name is valid Unicode text: ``:``-separated, non-empty segments without whitespace,
``*`` or a NUL character (PostgreSQL keeps no NUL in text, so no signal store takes
one: a name is accepted or refused alike on every backend). A pattern is a name whose
segments may be wildcards:

* ``*`` as a whole segment matches exactly one segment; inside a segment
  (``trade*``) it matches any run of characters within that segment;
* ``**`` as a whole segment matches zero or more whole segments, so ``trade:**``
  matches ``trade``, ``trade:proposed`` and ``trade:a:b``, and ``**`` alone matches
  every name;
* every other character is literal (dots and brackets included);
* a compiled :class:`re.Pattern` is accepted too and must match the whole name.

Patterns compile once (cached) into a predicate ``name -> bool``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable
from typing import TypeAlias

from reactor.exceptions import PatternError, SignalNameError

__all__ = [
    "VALID_NAMES",
    "Matcher",
    "Pattern",
    "compile_pattern",
    "is_exact",
    "normalize_patterns",
    "validate_name",
]

Pattern: TypeAlias = str | re.Pattern[str]
"""A glob string or a compiled regular expression matched against whole names."""

Matcher: TypeAlias = Callable[[str], bool]

_WHITESPACE = re.compile(r"\s")
_SEGMENT = "[^:]+"


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid signal name, else raise :class:`SignalNameError`."""
    if name in _VALID:
        return name
    if not isinstance(name, str):
        raise SignalNameError(
            f"Signal names are strings, got {type(name).__name__} {name!r}.", name=name
        )
    problem = _name_problem(name)
    if problem is not None:
        raise SignalNameError(f"Invalid signal name {name!r}: {problem}.", name=name)
    if len(_VALID) < 100_000:
        _VALID.add(name)
    return name


_VALID: set[str] = set()
"""Names already validated (names repeat across runs; this bounds the cache)."""

VALID_NAMES: Collection[str] = _VALID
"""The names :func:`validate_name` has already passed (for a lookup without a call)."""


def _name_problem(name: str) -> str | None:
    if not name:
        return "a name cannot be empty"
    if _WHITESPACE.search(name):
        return "names cannot contain whitespace"
    if "*" in name:
        return "'*' is reserved for patterns; emit a concrete name such as 'trade:proposed'"
    if "" in name.split(":"):
        return "segments between ':' cannot be empty"
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"names must be valid Unicode text (a lone surrogate at index {exc.start})"
    if "\x00" in name:
        return f"names cannot contain a NUL character ('\\x00' at index {name.index(chr(0))})"
    return None


def is_exact(pattern: Pattern) -> bool:
    """Return whether ``pattern`` is a literal name (matches exactly one name)."""
    return isinstance(pattern, str) and "*" not in pattern


def compile_pattern(pattern: Pattern) -> Matcher:
    """Compile ``pattern`` to a predicate over names; cached per pattern.

    Raises:
        PatternError: The pattern is empty, has an empty segment, contains whitespace,
            or uses ``**`` other than as a whole segment (``***``, ``a**b``).
    """
    if isinstance(pattern, re.Pattern):
        return _compile_regex(pattern)
    if not isinstance(pattern, str):
        raise PatternError(
            f"A pattern is a string or a compiled re.Pattern, got {type(pattern).__name__} "
            f"{pattern!r}.",
            pattern=pattern,
        )
    return _compile_glob(pattern)


@functools.lru_cache(maxsize=4096)
def _compile_regex(pattern: re.Pattern[str]) -> Matcher:
    return lambda name: pattern.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)
def _compile_glob(pattern: str) -> Matcher:
    if not pattern:
        raise PatternError("Invalid pattern '': a pattern cannot be empty.", pattern=pattern)
    if "*" not in pattern:
        problem = _name_problem(pattern)
        if problem is not None:
            raise PatternError(f"Invalid pattern {pattern!r}: {problem}.", pattern=pattern)
        return pattern.__eq__
    if _WHITESPACE.search(pattern) or "\x00" in pattern:
        raise PatternError(
            f"Invalid pattern {pattern!r}: patterns cannot contain whitespace or a NUL character.",
            pattern=pattern,
        )
    # Matching runs against ":" + name, so every segment, the first included, is
    # preceded by a colon and `**` can swallow zero or more ":segment" groups.
    parts: list[str] = []
    for segment in pattern.split(":"):
        if not segment:
            raise PatternError(
                f"Invalid pattern {pattern!r}: segments between ':' cannot be empty.",
                pattern=pattern,
            )
        if segment == "**":
            parts.append(f"(?::{_SEGMENT})*")
        elif "**" in segment:
            raise PatternError(
                f"Invalid pattern {pattern!r}: '**' must be a whole segment "
                f"(write 'a:**', not 'a**'), found {segment!r}.",
                pattern=pattern,
            )
        elif segment == "*":
            parts.append(f":{_SEGMENT}")
        else:
            parts.append(":" + "[^:]*".join(re.escape(piece) for piece in segment.split("*")))
    regex = re.compile("".join(parts))
    return lambda name: regex.fullmatch(":" + name) is not None


def normalize_patterns(patterns: Pattern | Iterable[Pattern]) -> tuple[Pattern, ...]:
    """Turn one pattern or an iterable of them into a validated, de-duplicated tuple.

    Raises:
        PatternError: Any pattern is invalid, or no pattern was given.
    """
    items: tuple[Pattern, ...]
    if isinstance(patterns, str | re.Pattern):
        items = (patterns,)
    else:
        try:
            items = tuple(patterns)
        except TypeError:
            raise PatternError(
                f"Expected a pattern or an iterable of patterns, got {patterns!r}.",
                pattern=patterns,
            ) from None
    if not items:
        raise PatternError("At least one pattern is required.", pattern=patterns)
    for item in items:
        compile_pattern(item)
    return tuple(dict.fromkeys(items))
