"""Admission: which triggers an agent is given, when the world moves faster than a model.

A desk's feed changes a quote many times a second and a model answers in seconds; an
agent that answers every change falls minutes behind and pays for answers nobody
reads. ``admit=`` on ``agent(...)`` (triggers within a run) and on ``Reaction(...)``
(object events in the service) declares what it is given, one policy or a tuple of
them applied in order:

* :class:`Latest`: while the agent is busy or a trigger waits, only the newest trigger
  per key waits; the older ones are ``superseded``.
* :class:`Debounce`: triggers within ``seconds`` of each other merge; the last (or all
  of them, ``deliver="batch"``) is delivered once they stop, or after ``max_wait``.
* :class:`Throttle`: a token bucket of ``burst`` refilled at ``rate``: triggers beyond
  wait for a token, never dropped.
* :class:`Batch`: up to ``max_items`` triggers delivered at once, or fewer after
  ``max_wait`` seconds.
* :class:`SpendCap`: model spend per period; past it triggers are ``held``, never lost.

``keep=`` on every policy names the triggers it never supersedes or merges (signal
name patterns in a run; object types for reactions): fills and orders. Every decision
is recorded (``agent:<name>:skipped`` in a run, a processing-log status for a
reaction), so a replay and an evaluation see the same admitted triggers.

The policies are plain, frozen values, checked when made (a bad one is an
:class:`~reactor.exceptions.AgentConfigError` saying what to write instead).

What ``Latest``, ``Debounce``, ``Batch`` and ``Throttle`` do is here too, the one code
both admissions run (``reactor._activation.admitting`` in a run,
``reactor.service._reactions.admitting`` in the service): :func:`apply_latest` and
its siblings take the picks (:class:`Pick`: a waiting trigger or entry, when it
arrived, its order, the name ``keep=`` matches, what was merged into it) the policy
before let through, in arrival order, and return those they let through. A
:class:`Round` is one decision in the making: its time, what may go, and how its side
notes what a policy decides (when to decide again, who superseded whom, which
throttle tokens are taken).
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, Generic, Literal, Never, Protocol, TypeAlias, TypeVar

import pydantic

from reactor._agents.check import Checked
from reactor.exceptions import AgentConfigError

__all__ = [
    "AdmissionPolicy",
    "Batch",
    "Debounce",
    "Latest",
    "Pick",
    "Round",
    "SpendCap",
    "Throttle",
    "admission",
    "apply_batch",
    "apply_debounce",
    "apply_latest",
    "apply_throttle",
    "in_order",
    "key_of",
    "parse_rate",
]

_ORDER = operator.attrgetter("order")

Key: TypeAlias = str | Callable[[Any], Any] | None
"""What groups triggers: a template over the trigger (``"{{ signal.payload.symbol }}"``,
``"{{ object.data.symbol }}"``), a function of it, or ``None`` (a reaction's object id;
one group for a run's agent)."""

_RATE = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)?\s*(s|sec|second|m|min|minute|h|hour)s?\s*$"
)
_UNIT_SECONDS = {
    "s": 1,
    "sec": 1,
    "second": 1,
    "m": 60,
    "min": 60,
    "minute": 60,
    "h": 3600,
    "hour": 3600,
}


def parse_rate(rate: str | float) -> float:
    """Triggers per second from ``"2/s"``, ``"30/min"``, ``"100/h"``, ``"1/5s"`` or a number.

    Raises:
        ValueError: It is none of those, or not above zero.
    """
    if isinstance(rate, bool):
        raise ValueError(f"{rate!r} is not a rate")
    if isinstance(rate, int | float):
        per_second = float(rate)
    else:
        found = _RATE.match(str(rate))
        if found is None:
            raise ValueError(
                f"{rate!r} is not a rate; write it as a count per unit: '2/s', '30/min', "
                "'100/h' or '1/5s'"
            )
        count, every, unit = found.groups()
        per_second = float(count) / (float(every or 1) * _UNIT_SECONDS[unit])
    if not per_second > 0:
        raise ValueError(f"the rate {rate!r} is not above zero")
    return per_second


class _Policy(Checked):
    """What every policy has: the triggers it keeps (``keep=``)."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    keep: tuple[str, ...] = ()

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)

    @pydantic.field_validator("keep", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @pydantic.field_validator("keep")
    @classmethod
    def _patterns(cls, keep: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in keep:
            if not pattern.strip():
                raise ValueError("an empty pattern keeps nothing: name signals or object types")
        return tuple(dict.fromkeys(keep))


def _check_key(key: Any) -> Any:
    if key is not None and not isinstance(key, str) and not callable(key):
        raise ValueError(
            f"{key!r} is not a key: give a template over the trigger "
            "('{{ signal.payload.symbol }}'), a function of it, or None"
        )
    return key


KeyField = Annotated[Any, pydantic.AfterValidator(_check_key)]


class Latest(_Policy):
    """Only the newest trigger per key waits; the older ones are ``superseded``.

    While the agent is busy (with that key) or a trigger already waits, a new trigger
    replaces the waiting one. In the service the key defaults to the object id: an
    analyst gets the newest quote of each symbol, never a queue of stale ones.

    Attributes:
        key: What groups triggers (see :data:`Key`).
        keep: Triggers never superseded (signal patterns, or object types).
    """

    key: KeyField = None

    def __init__(
        self, *, key: Key = None, keep: Iterable[str] | str = (), **unknown: Never
    ) -> None:
        super().__init__(key=key, keep=keep, **unknown)


class Debounce(_Policy):
    """Triggers within ``seconds`` of each other merge into one activation.

    It is delivered once no new trigger came for ``seconds`` (or ``max_wait`` after
    the first, so a steady stream is not put off for ever): the last trigger, or all of
    them in arrival order (``deliver="batch"``: ``ctx.batch``). The others are
    recorded ``merged``.

    Attributes:
        seconds: The quiet time that ends a burst.
        deliver: ``last`` or ``batch``.
        max_wait: The longest a burst's first trigger waits (``None``: no bound).
        key: What groups triggers (see :data:`Key`).
        keep: Triggers never merged away.
    """

    seconds: float = pydantic.Field(gt=0)
    deliver: Literal["last", "batch"] = "last"
    max_wait: float | None = pydantic.Field(default=None, gt=0)
    key: KeyField = None

    def __init__(
        self,
        seconds: float,
        *,
        deliver: Literal["last", "batch"] = "last",
        max_wait: float | None = None,
        key: Key = None,
        keep: Iterable[str] | str = (),
        **unknown: Never,
    ) -> None:
        super().__init__(
            seconds=seconds, deliver=deliver, max_wait=max_wait, key=key, keep=keep, **unknown
        )

    @pydantic.field_validator("max_wait")
    @classmethod
    def _bounded(cls, max_wait: float | None, info: pydantic.ValidationInfo) -> float | None:
        seconds = info.data.get("seconds")
        if max_wait is not None and seconds is not None and max_wait < seconds:
            raise ValueError(
                f"{max_wait:g} s is shorter than seconds ({seconds:g} s): a burst would never "
                "be quiet long enough; raise max_wait or drop it"
            )
        return max_wait


class Throttle(_Policy):
    """At most ``rate`` activations, in a token bucket of ``burst``; the rest wait.

    Triggers beyond the rate wait for a token, in arrival order; none is dropped
    (``(Latest(), Throttle("2/s"))``: what waits for the bucket is coalesced to the
    newest).

    Attributes:
        rate: Activations per second (given as ``"2/s"``, ``"30/min"``, ``"100/h"``).
        per: One bucket per key (see :data:`Key`), or one for the agent (``None``).
        burst: How many activations may start at once after a quiet spell.
        keep: Triggers that are never coalesced by a policy before this one.
    """

    rate: float
    per: KeyField = None
    burst: int = pydantic.Field(default=1, ge=1)

    def __init__(
        self,
        rate: str | float,
        *,
        per: Key = None,
        burst: int = 1,
        keep: Iterable[str] | str = (),
        **unknown: Never,
    ) -> None:
        super().__init__(rate=rate, per=per, burst=burst, keep=keep, **unknown)

    @pydantic.field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> float:
        return parse_rate(value)


class Batch(_Policy):
    """Up to ``max_items`` triggers delivered at once (``ctx.batch``), or fewer after ``max_wait``.

    Attributes:
        max_items: Triggers in one activation at most.
        max_wait: Seconds the first trigger of a batch waits at most.
        key: One batch per key (see :data:`Key`), or one for the agent (``None``).
        keep: Triggers delivered alone, never batched.
    """

    max_items: int = pydantic.Field(ge=1)
    max_wait: float = pydantic.Field(gt=0)
    key: KeyField = None

    def __init__(
        self,
        max_items: int,
        max_wait: float,
        *,
        key: Key = None,
        keep: Iterable[str] | str = (),
        **unknown: Never,
    ) -> None:
        super().__init__(max_items=max_items, max_wait=max_wait, key=key, keep=keep, **unknown)


class SpendCap(Checked):
    """What model calls may cost per period; past it, activations are ``held``, not lost.

    The cost is summed per period across every process of the service (through its
    database); an activation that would start past the cap is held (processing status
    ``held``, in a run ``agent:<name>:skipped`` reason ``spend_cap``) and released when
    the period rolls or an admin raises the cap.

    Attributes:
        usd: The cap, in US dollars.
        per: The period (an hour by default).
        scope: ``agent`` (this agent's spend) or ``service`` (every agent's).
    """

    usd: float = pydantic.Field(gt=0)
    per: timedelta = timedelta(hours=1)
    scope: Literal["agent", "service"] = "agent"

    def __init__(
        self,
        usd: float,
        *,
        per: timedelta | float = timedelta(hours=1),
        scope: Literal["agent", "service"] = "agent",
        **unknown: Never,
    ) -> None:
        super().__init__(usd=usd, per=per, scope=scope, **unknown)

    @pydantic.field_validator("per")
    @classmethod
    def _positive(cls, per: timedelta) -> timedelta:
        if per <= timedelta(0):
            raise ValueError("must be a positive duration, e.g. timedelta(hours=1)")
        return per


AdmissionPolicy: TypeAlias = Latest | Debounce | Throttle | Batch | SpendCap
"""One policy of ``admit=``."""

_POLICIES = (Latest, Debounce, Throttle, Batch, SpendCap)


def admission(admit: Any, *, where: str = "admit=") -> tuple[AdmissionPolicy, ...]:
    """``admit=`` as a tuple of policies: one policy, a tuple or list of them, or ``None``.

    A stored definition's JSON form of each (:func:`policy_config`) is taken too.

    Raises:
        AgentConfigError: Something in it is not a policy, or a policy comes twice.
    """
    if admit is None:
        return ()
    given = tuple(admit) if isinstance(admit, tuple | list) else (admit,)
    given = tuple(policy_from_config(p) if isinstance(p, dict) else p for p in given)
    kinds: list[type] = []
    for policy in given:
        if not isinstance(policy, _POLICIES):
            raise AgentConfigError(
                f"{where} takes admission policies (reactor.Latest, Debounce, Throttle, "
                f"Batch, SpendCap), one or a tuple of them; got {policy!r}."
            )
        if type(policy) in kinds:
            raise AgentConfigError(
                f"{where} has two {type(policy).__name__} policies; give each kind once."
            )
        kinds.append(type(policy))
    return given


def key_of(policy: AdmissionPolicy) -> Any:
    """A policy's key (``key``, or a throttle's ``per``): ``None`` when it has none."""
    if isinstance(policy, Throttle):
        return policy.per
    if isinstance(policy, Latest | Debounce | Batch):
        return policy.key
    return None


_BY_NAME: dict[str, type[Checked]] = {kind.__name__.lower(): kind for kind in _POLICIES}


def policy_config(policy: AdmissionPolicy) -> dict[str, Any]:
    """A policy as JSON, for a stored definition: ``{"policy": "latest", "key": ...}``.

    A key that is a function is stored by its name (code keeps the policy itself).
    """
    fields = policy.model_dump(mode="python", exclude_defaults=True)
    for name in ("key", "per"):
        value = fields.get(name)
        if callable(value):
            fields[name] = f"<function {getattr(value, '__qualname__', repr(value))}>"
    if isinstance(fields.get("per"), timedelta):
        fields["per"] = fields["per"].total_seconds()
    if "keep" in fields:
        fields["keep"] = list(fields["keep"])
    return {"policy": type(policy).__name__.lower(), **fields}


def policy_from_config(config: Any) -> AdmissionPolicy:
    """A policy from its JSON (:func:`policy_config`), with the policies' own errors.

    Raises:
        AgentConfigError: It is not ``{"policy": <latest, debounce, throttle, batch or
            spendcap>, ...}`` with that policy's fields.
    """
    if isinstance(config, _POLICIES):
        return config
    kind = _BY_NAME.get(str(config.get("policy", "")).lower()) if isinstance(config, dict) else None
    if kind is None:
        raise AgentConfigError(
            f'An admission policy is written {{"policy": "latest" | "debounce" | '
            f'"throttle" | "batch" | "spendcap", ...its fields}}; got {config!r}.'
        )
    fields = {name: value for name, value in config.items() if name != "policy"}
    made: AdmissionPolicy = kind(**fields)  # type: ignore[assignment]  # _BY_NAME's kinds
    return made


# -- what the policies do -------------------------------------------------------------
#
# Both admissions run this: an agent's in a run (reactor._activation.admitting), on
# triggers, and a reaction's in the service (reactor.service._reactions.admitting), on
# the processing log's entries. How a side keys its work, and what a spend cap does,
# stay with it.

T = TypeVar("T")


class Pick(Generic[T]):
    """A waiting trigger (or entry) that may start, and the picks merged into it.

    Attributes:
        item: The trigger or entry itself (what a policy's key reads).
        at: When it arrived (seconds, on the clock of the round's ``now``).
        order: Its place in arrival order (a signal's ``seq``, an entry's id).
        name: What ``keep=`` patterns match (a signal's name, an object's type).
        merged: The picks merged into it, with what they carried (sorted by ``order``
            when it starts).
        batch: Whether the merged ones are delivered with it (``ctx.batch``).
        tokens: Throttle tokens it takes if it starts (bucket -> its next due time).
    """

    __slots__ = ("at", "batch", "item", "merged", "name", "order", "tokens")

    def __init__(self, item: T, at: float, order: int, name: str) -> None:
        self.item = item
        self.at = at
        self.order = order
        self.name = name
        self.merged: list[Pick[T]] = []
        self.batch = False
        self.tokens: dict[str, float] = {}


class Round(Protocol[T]):
    """One decision in the making, as the policies see it."""

    @property
    def now(self) -> float:
        """The time (seconds, the clock of the picks' ``at``)."""

    @property
    def ready(self) -> list[Pick[T]]:
        """What the policies before let through, in arrival order."""

    def wake(self, at: float) -> None:
        """Decide again at ``at`` at the latest: what waits may go then."""

    def supersede(self, older: Pick[T], newer: Pick[T]) -> None:
        """``newer`` took the place of ``older`` (of the same key)."""

    def token(self, pick: Pick[T], bucket: str, due: float) -> None:
        """``pick`` took a token of ``bucket``, whose next token is due at ``due``."""


def apply_latest(
    policy: Latest, state: Round[T], key: Callable[[T], str], running: Iterable[T]
) -> list[Pick[T]]:
    """Per key the newest only; it waits while an item of its key is ``running``."""
    kept, grouped = _split(state.ready, policy.keep, key)
    busy = {key(item) for item in running}
    for group, picks in grouped.items():
        newest = picks[-1]
        for older in picks[:-1]:
            state.supersede(older, newest)
            newest.merged.extend(older.merged)  # what it carried goes with the newest
        if group not in busy:
            kept.append(newest)
    return in_order(kept)


def apply_debounce(policy: Debounce, state: Round[T], key: Callable[[T], str]) -> list[Pick[T]]:
    """Per key, a burst once it is quiet (or its first waited ``max_wait``), as its newest."""
    kept, grouped = _split(state.ready, policy.keep, key)
    for picks in grouped.values():
        due = picks[-1].at + policy.seconds
        if policy.max_wait is not None:
            due = min(due, picks[0].at + policy.max_wait)
        if state.now < due:
            state.wake(due)
            continue
        kept.append(_merged(picks, batch=policy.deliver == "batch"))
    return in_order(kept)


def apply_batch(policy: Batch, state: Round[T], key: Callable[[T], str]) -> list[Pick[T]]:
    """Per key, ``max_items`` as one, or fewer once the first has waited ``max_wait``."""
    kept, grouped = _split(state.ready, policy.keep, key)
    size = policy.max_items
    for picks in grouped.values():
        full = len(picks) - len(picks) % size
        for start in range(0, full, size):
            kept.append(_merged(picks[start : start + size], batch=True))
        rest = picks[full:]
        if not rest:
            continue
        due = rest[0].at + policy.max_wait
        if state.now >= due:
            kept.append(_merged(rest, batch=True))
        else:
            state.wake(due)
    return in_order(kept)


def apply_throttle(
    policy: Throttle,
    state: Round[T],
    key: Callable[[T], str],
    buckets: Mapping[str, float],
    prefix: str = "",
) -> list[Pick[T]]:
    """What finds a token in its bucket (``prefix`` and its key), in arrival order.

    ``buckets`` holds when each bucket's next token is due; a bucket it does not name
    is full.
    """
    every, slack = 1.0 / policy.rate, (policy.burst - 1) / policy.rate
    now = state.now
    dues = dict(buckets)
    ready = []
    for pick in state.ready:
        bucket = prefix + key(pick.item)
        due = max(dues.get(bucket, now), now)
        if due - slack > now:  # no token yet: it waits, in arrival order
            state.wake(due - slack)
            continue
        dues[bucket] = due + every
        state.token(pick, bucket, due + every)
        ready.append(pick)
    return ready


def in_order(picks: Iterable[Pick[T]]) -> list[Pick[T]]:
    """``picks`` in arrival order."""
    return sorted(picks, key=_ORDER)


def _split(
    picks: Iterable[Pick[T]], keep: Sequence[str], key: Callable[[T], str]
) -> tuple[list[Pick[T]], dict[str, list[Pick[T]]]]:
    """The picks a policy keeps aside (their name matches ``keep``), and the rest by key."""
    kept: list[Pick[T]] = []
    grouped: dict[str, list[Pick[T]]] = {}
    for pick in picks:
        if keep and any(fnmatch.fnmatchcase(pick.name, pattern) for pattern in keep):
            kept.append(pick)
        else:
            grouped.setdefault(key(pick.item), []).append(pick)
    return kept, grouped


def _merged(picks: Sequence[Pick[T]], *, batch: bool) -> Pick[T]:
    """The newest of ``picks``, carrying the others (and what they carried)."""
    newest = picks[-1]
    for older in picks[:-1]:
        newest.merged.extend([*older.merged, older])
        newest.tokens.update(older.tokens)
    newest.batch = newest.batch or batch
    return newest
