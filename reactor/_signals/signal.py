"""The immutable signal record and its JSON form."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pydantic
import pydantic_core

from reactor._signals.patterns import Pattern, compile_pattern

__all__ = ["Signal", "iso_time", "new_signal", "to_jsonable"]


def _new_id() -> str:
    return f"sig_{uuid.uuid4().hex[:16]}"


@dataclasses.dataclass(frozen=True, slots=True)
class Signal:
    """One thing that happened in a run: immutable, ordered, and traceable to its cause.

    Signals are created by :meth:`reactor.SignalBus.emit`; construct one yourself only
    for tests or tooling. Change one by copying (``dataclasses.replace``).

    Attributes:
        name: ``:``-separated segments, e.g. ``state:analysis:changed``.
        payload: Any value pydantic can serialize (models, dicts, lists, scalars).
        id: Unique within a run (``sig_...``).
        seq: Strictly increasing per run: the total order of emission.
        timestamp: UNIX seconds (ISO 8601 in the JSON form).
        source: Who emitted it: ``"harness"``, ``"store"``, ``"user"`` or an agent's name.
        caused_by: Id of the signal that caused this one, or ``None`` for a root.
        depth: Number of agent activations on the causal chain from the run's start.
        run_id: The run the signal belongs to, if any.
    """

    name: str
    payload: Any = None
    _: dataclasses.KW_ONLY
    id: str = dataclasses.field(default_factory=_new_id)
    seq: int = 0
    timestamp: float = dataclasses.field(default_factory=time.time)
    source: str | None = None
    caused_by: str | None = None
    depth: int = 0
    run_id: str | None = None

    def matches(self, pattern: Pattern) -> bool:
        """Return whether this signal's name matches ``pattern`` (see :mod:`reactor`)."""
        return compile_pattern(pattern)(self.name)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON-able form: payload serialized, timestamp in ISO 8601."""
        return {
            "id": self.id,
            "seq": self.seq,
            "name": self.name,
            "payload": to_jsonable(self.payload),
            "timestamp": iso_time(self.timestamp),
            "source": self.source,
            "caused_by": self.caused_by,
            "depth": self.depth,
            "run_id": self.run_id,
        }

    def to_json(self) -> str:
        """Serialize to a JSON object (one line, UTF-8, no trailing newline)."""
        data = {
            "id": self.id,
            "seq": self.seq,
            "name": self.name,
            "payload": self.payload,
            "timestamp": iso_time(self.timestamp),
            "source": self.source,
            "caused_by": self.caused_by,
            "depth": self.depth,
            "run_id": self.run_id,
        }
        return pydantic_core.to_json(data, fallback=json_fallback).decode()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, payload_type: Any = None) -> Signal:
        """Rebuild a signal from :meth:`to_dict` output.

        Args:
            data: The mapping to read.
            payload_type: Optional type to validate the payload into (for example the
                pydantic model it was serialized from); by default the payload stays
                plain JSON data.

        Raises:
            pydantic.ValidationError: ``data`` is not a serialized signal.
        """
        wire = _SignalWire.model_validate(data)
        payload = wire.payload
        if payload_type is not None:
            payload = pydantic.TypeAdapter(payload_type).validate_python(payload)
        return cls(
            wire.name,
            payload,
            id=wire.id,
            seq=wire.seq,
            timestamp=wire.timestamp.timestamp(),
            source=wire.source,
            caused_by=wire.caused_by,
            depth=wire.depth,
            run_id=wire.run_id,
        )

    @classmethod
    def from_json(cls, data: str | bytes, *, payload_type: Any = None) -> Signal:
        """Parse the output of :meth:`to_json`; see :meth:`from_dict` for ``payload_type``."""
        return cls.from_dict(pydantic_core.from_json(data), payload_type=payload_type)


class _SignalWire(pydantic.BaseModel):
    """Validation schema of the serialized form; gives precise errors on bad input."""

    model_config = pydantic.ConfigDict(extra="forbid")

    id: str
    seq: int
    name: str
    payload: Any = None
    timestamp: pydantic.AwareDatetime
    source: str | None = None
    caused_by: str | None = None
    depth: int = 0
    run_id: str | None = None

    @pydantic.field_validator("timestamp", mode="before")
    @classmethod
    def _from_unix_seconds(cls, value: object) -> object:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, tz=UTC)
        return value


class _Unfrozen:
    """A signal being built: the same slots as :class:`Signal`, in the same order, unfrozen.

    Filling these slots is plain attribute assignment; the finished object then becomes
    a :class:`Signal` (``__class__`` assignment, allowed between classes of the same
    layout). That is how the bus builds each signal, about twice as fast as setting a
    frozen dataclass's slots one descriptor call at a time.
    """

    __slots__ = Signal.__slots__  # made by dataclass(slots=True)


def new_signal(
    name: str,
    payload: Any,
    id: str,
    seq: int,
    timestamp: float,
    source: str | None,
    caused_by: str | None,
    depth: int,
    run_id: str | None,
    _new: Any = object.__new__,
    _draft: Any = _Unfrozen,
    _signal: Any = Signal,
) -> Signal:
    """Build a signal without validation: the bus's hot path (see :class:`_Unfrozen`)."""
    signal = _new(_draft)
    signal.name = name
    signal.payload = payload
    signal.id = id
    signal.seq = seq
    signal.timestamp = timestamp
    signal.source = source
    signal.caused_by = caused_by
    signal.depth = depth
    signal.run_id = run_id
    signal.__class__ = _signal
    return signal  # type: ignore[no-any-return]  # a Signal now


def iso_time(when: float | datetime, timespec: str = "auto") -> str:
    """``when`` (a UNIX time, or an aware datetime) in ISO 8601, in UTC, ending in ``Z``.

    Every time reactor writes in ISO form comes from here (signals, run rows, timers,
    the API, the web UI, the CLI), so they all read alike: ``2025-01-31T09:30:00.25Z``.
    """
    moment = when if isinstance(when, datetime) else datetime.fromtimestamp(when, tz=UTC)
    return moment.astimezone(UTC).isoformat(timespec=timespec)[:-6] + "Z"  # "+00:00"


# Objects that stand for another value when serialized (the read-only state views of
# the stores package) register here, keeping this module free of imports from them.
_UNWRAPPERS: list[tuple[type[Any], Callable[[Any], Any]]] = []


def register_json_unwrapper(kind: type[Any], unwrap: Callable[[Any], Any]) -> None:
    """Serialize instances of ``kind`` as ``unwrap(instance)`` in every signal payload."""
    _UNWRAPPERS.append((kind, unwrap))


def unwrapper_of(value: Any) -> Callable[[Any], Any] | None:
    """The registered function that gives ``value``'s serialized stand-in, if any."""
    for kind, unwrap in _UNWRAPPERS:
        if isinstance(value, kind):
            return unwrap
    return None


def json_fallback(value: Any) -> Any:
    """Serialize what pydantic does not know: registered wrappers, else ``repr``."""
    for kind, unwrap in _UNWRAPPERS:
        if isinstance(value, kind):
            return unwrap(value)
    return repr(value)


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` to plain JSON data (dicts, lists, str, numbers, bool, None)."""
    return pydantic_core.to_jsonable_python(value, fallback=json_fallback)
