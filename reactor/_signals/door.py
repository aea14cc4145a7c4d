"""The check at the door: only values the log can hold enter a run or a store.

Every value that comes in from outside a run's own code (run input, ``send``,
``send_to``, ``reply``, ``store.post``, ``ctx.emit``, store writes, object data) is
checked here once, where it enters; the code behind the door trusts it. A value the
log cannot hold (a lone surrogate, ``NaN`` or ``Infinity``, a type with no JSON form)
raises :class:`~reactor.exceptions.PayloadError` naming the path of the first bad
value, before anything is emitted or stored, so one bad value never reaches a signal
store, where it would fail a whole batch of other runs' signals.

A NUL character (U+0000) is refused only where a database cannot hold it, so that
SQLite and PostgreSQL give the same answer: in object data (``check_payload(...,
nul=True)``: PostgreSQL's ``jsonb`` has no NUL) and in text that is stored or compared
in a text column (:func:`check_text`: names, types, ids, filters). A signal's payload
may hold one: the log keeps payloads as ``json`` text, where it is an escape.

The check serializes the value once (pydantic's Rust encoder, with the project's own
encoders: the read-only state views); only when that fails, or when the output could
hold ``NaN``/``Infinity``, does it walk the value to find the path.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from collections.abc import Collection, Mapping
from typing import Any

import pydantic
import pydantic_core

from reactor._signals.signal import unwrapper_of
from reactor.exceptions import PayloadError

__all__ = ["check_length", "check_payload", "check_text", "storable_text"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ADVICE = (
    "Nothing was emitted or stored. Pass JSON-compatible data: valid Unicode text, "
    "finite numbers, and dicts, lists, numbers, strings, booleans, None, pydantic "
    "models or dataclasses (convert other objects first)."
)


class _NoJSONForm(Exception):
    """A value the project's encoders do not know."""


def _strict_fallback(value: Any) -> Any:
    unwrap = unwrapper_of(value)
    if unwrap is None:
        raise _NoJSONForm(type(value).__name__)
    return unwrap(value)


def check_payload(value: Any, where: str, *, nul: bool = False) -> None:
    """Raise :class:`PayloadError` if the log cannot hold ``value``.

    Args:
        value: What enters (a payload, an input, a state value, object data).
        where: The name of the value in the message's path (``input``, ``payload``,
            ``state.items``, ``data``).
        nul: Refuse a NUL character in any string, key or value, at any depth (object
            data, which PostgreSQL keeps as ``jsonb``).

    Raises:
        PayloadError: A string with a lone surrogate (or a NUL, with ``nul``),
            ``NaN``/``Infinity``, or a value with no JSON form; the message names its
            path.
    """
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return
    if kind is str and value.isascii() and not (nul and "\x00" in value):
        return
    encoded: bytes | None = None
    try:
        encoded = pydantic_core.to_json(value, fallback=_strict_fallback)
    except Exception:  # what failed is found by the walk below
        pass
    else:
        suspect = b"NaN" in encoded or b"Infinity" in encoded
        if not suspect and not (nul and b"\\u0000" in encoded):
            return
    found = _find(value, where, 0, nul)
    if found is None:
        if encoded is not None:
            return  # "NaN" (or a backslash and "u0000") inside a string
        found = (where, "a value with no JSON form")
    path, reason = found
    raise PayloadError(f"{path} cannot be recorded: it is {reason}. {_ADVICE}", path=path)


def check_text(text: str, where: str) -> None:
    """Raise :class:`PayloadError` if a database cannot hold or compare ``text``.

    For text that goes into (or is looked up in) a text column: an object's type or
    id, a filter of a listing. PostgreSQL refuses a NUL there and SQLite does not;
    refused here, both answer the same.

    Args:
        text: The text.
        where: Its name in the message (``type``, ``tag``, ``object_id``).

    Raises:
        PayloadError: It holds a NUL character or a lone surrogate.
    """
    if text.isascii() and "\x00" not in text:
        return
    found = _bad_text(text, where, nul=True)
    if found is not None:
        path, reason = found
        raise PayloadError(f"{path} cannot be used: it is {reason}.", path=path)


def storable_text(text: str) -> str:
    r"""``text`` as every log and database holds it: NUL and lone surrogates spelled out.

    For text reactor writes that nobody checked at a door: an exception's message (an
    agent's failure, a reaction's error). A NUL becomes ``\x00`` and a lone surrogate
    ``\udXXX``, so that one odd message never fails the log or the batch it is
    written with (PostgreSQL holds no NUL; no UTF-8 holds a lone surrogate).
    """
    if text.isascii() and "\x00" not in text:
        return text
    spelled = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return spelled.replace("\x00", "\\x00")


def _key_path(path: str, key: Any) -> str:
    if isinstance(key, str) and _IDENTIFIER.match(key):
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


def _find(value: Any, path: str, depth: int, nul: bool) -> tuple[str, str] | None:
    """The path of the first value the log cannot hold, and why, or ``None``."""
    if depth > 200:
        return (path, "nested too deeply (over 200 levels)")
    if value is None or isinstance(value, bool | int):
        return None
    if isinstance(value, str):
        return _bad_text(value, path, nul=nul)
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, f"{value!r}, which JSON cannot hold")
    unwrap = unwrapper_of(value)
    if unwrap is not None:
        return _find(unwrap(value), path, depth + 1, nul)
    if isinstance(value, Mapping):
        return _find_in_mapping(value, path, depth, nul)
    if isinstance(value, list | tuple | set | frozenset):
        return _find_in_items(value, path, depth, nul)
    return _find_in_object(value, path, depth, nul)


def _find_in_mapping(
    value: Mapping[Any, Any], path: str, depth: int, nul: bool
) -> tuple[str, str] | None:
    """:func:`_find` in a mapping: its keys must be strings (or scalars JSON makes them)."""
    for key, item in value.items():
        if isinstance(key, str):
            bad_key = _bad_text(key, f"{path} (a key)", nul=nul)
            if bad_key is not None:
                return bad_key
        elif not isinstance(key, int | float | bool | enum.Enum) and key is not None:
            return (f"{path} (a key)", f"a {type(key).__name__} key; keys must be strings")
        found = _find(item, _key_path(path, key), depth + 1, nul)
        if found is not None:
            return found
    return None


def _find_in_items(
    value: Collection[Any], path: str, depth: int, nul: bool
) -> tuple[str, str] | None:
    """:func:`_find` in a list, tuple or set, item by item."""
    for index, item in enumerate(value):
        found = _find(item, f"{path}[{index}]", depth + 1, nul)
        if found is not None:
            return found
    return None


def _find_in_object(value: Any, path: str, depth: int, nul: bool) -> tuple[str, str] | None:
    """:func:`_find` in any other value, by what it holds.

    A model's or a dataclass's fields, an enum's value, bytes as UTF-8 text, or else
    whatever JSON form pydantic gives it.
    """
    if isinstance(value, pydantic.BaseModel):
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        return _find({**fields, **(value.model_extra or {})}, path, depth + 1, nul)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        return _find(fields, path, depth + 1, nul)
    if isinstance(value, enum.Enum):
        return _find(value.value, path, depth + 1, nul)
    if isinstance(value, bytes | bytearray):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            return (path, f"bytes that are not UTF-8 (at index {exc.start}); send text")
        return None
    try:
        pydantic_core.to_json(value)
    except Exception:
        return (path, f"of type {type(value).__name__}, which has no JSON form")
    return None


def _bad_text(text: str, path: str, *, nul: bool = False) -> tuple[str, str] | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = text[exc.start]
        return (path, f"a string with a lone surrogate ({char!r} at index {exc.start})")
    if nul and "\x00" in text:
        index = text.index("\x00")
        return (
            path,
            f"a string with a NUL character ('\\x00' at index {index}), which PostgreSQL "
            "cannot keep (so neither database takes it): remove it",
        )
    return None


def check_length(value: Any, where: str, limit: int, setting: str) -> None:
    """Raise :class:`PayloadError` if ``value`` is longer than ``limit`` bytes.

    Text is measured as UTF-8; other data as its JSON. For what a person writes and
    the log keeps (an abort's reason, a decision's justification, a reply), so that one
    request never writes megabytes of it.

    Args:
        value: The text or data.
        where: Its name in the message (``reason``, ``justification``, ``answer``).
        limit: The most bytes taken.
        setting: The setting that says ``limit`` (``REACTOR_MAX_REASON``).

    Raises:
        PayloadError: It is longer; nothing was done.
    """
    if value is None:
        return
    if isinstance(value, str):
        size = len(value.encode("utf-8", "surrogatepass"))
    else:
        size = len(pydantic_core.to_json(value, fallback=str))
    if size > limit:
        raise PayloadError(
            f"The {where} is {size:,} bytes long; at most {limit:,} are taken ({setting}). "
            "Shorten it; nothing was done.",
            path=where,
        )
