"""What reaction agents propose, and what the service keeps about their work.

An agent proposes :class:`Changes`: its reasoning and a list of operations
(:class:`Create`, :class:`Update`, :class:`Delete`, each tagged ``op`` in JSON so a
model can answer with them). The service applies them, or keeps them as a
:class:`Suggestion` for a person; every event an agent is given is a
:class:`ProcessingEntry` of the processing log.
"""

from __future__ import annotations

import warnings
from datetime import datetime
from typing import Annotated, Any, Literal

import pydantic

from reactor.service._objects.values import ID_LENGTH, TYPE_LENGTH, Actor

__all__ = [
    "ADMITTED",
    "Approved",
    "Changes",
    "Create",
    "Delete",
    "EntryStatus",
    "Lag",
    "Operation",
    "ProcessingEntry",
    "Suggestion",
    "SuggestionStatus",
    "Update",
]

EntryStatus = Literal[
    "pending",
    "processing",
    "completed",
    "failed",
    "skipped",
    "abandoned",
    "superseded",
    "merged",
    "held",
]
ADMITTED = frozenset({"processing", "completed", "failed", "abandoned"})
"""The statuses of entries that were taken to be processed: a reaction ran (or runs) for
them. The lag counts them as ``admitted``; every other status but ``pending`` (waiting)
is an outcome of its own name (``skipped``, ``superseded``, ``merged``, ``held``)."""
SuggestionStatus = Literal["pending", "completed", "rejected", "expired", "superseded"]


class _Operation(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")


class Create(_Operation):
    """Create an object: ``Create("Company", {"name": "Acme"})``.

    Attributes:
        type: The new object's type.
        data: Its fields.
        id: Leave it empty: the store gives one (set when an agent's ``ctx.objects.create``
            is suggested, so the id it was shown is the one an approval creates).
    """

    op: Literal["create"] = "create"
    type: str = pydantic.Field(max_length=TYPE_LENGTH)
    data: dict[str, Any] = {}
    id: str | None = pydantic.Field(default=None, max_length=ID_LENGTH)

    def __init__(
        self, type: str | None = None, data: dict[str, Any] | None = None, /, **fields: Any
    ) -> None:
        if type is not None:
            fields["type"] = type
        if data is not None:
            fields["data"] = data
        super().__init__(**fields)


class Update(_Operation):
    """Update an object's fields (the others are kept): ``Update(id, {"email": ...})``."""

    op: Literal["update"] = "update"
    id: str
    data: dict[str, Any]

    def __init__(
        self, id: str | None = None, data: dict[str, Any] | None = None, /, **fields: Any
    ) -> None:
        if id is not None:
            fields["id"] = id
        if data is not None:
            fields["data"] = data
        super().__init__(**fields)


class Delete(_Operation):
    """Delete an object: ``Delete(id)``."""

    op: Literal["delete"] = "delete"
    id: str

    def __init__(self, id: str | None = None, /, **fields: Any) -> None:
        if id is not None:
            fields["id"] = id
        super().__init__(**fields)


Operation = Annotated[Create | Update | Delete, pydantic.Field(discriminator="op")]
"""One change, tagged by ``op``: ``create``, ``update`` or ``delete``."""


class Changes(pydantic.BaseModel):
    """What a reaction agent proposes: give it as the agent's ``output=``.

    Attributes:
        reasoning: Why: shown to the person who approves a suggestion.
        mode: For a ``hybrid`` agent, whether to apply the operations at once
            (``execute``) or suggest them (``suggest``, the default); other agents'
            execution mode decides and this is ignored.
        operations: The changes, applied in order and all or nothing.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    reasoning: str = ""
    mode: Literal["execute", "suggest"] = "suggest"
    operations: tuple[Operation, ...] = ()


class Approved(pydantic.BaseModel):
    """One approval a pending suggestion has gathered (``Approval(count=2)`` needs two).

    Attributes:
        principal: Who approved.
        roles: The roles they held then.
        authenticator: What vouched for them.
        changes_sha256: The digest of the changes they approved (an edit of the changes
            starts the count anew: only approvals of the current changes count).
        decided_at: When (UTC).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    principal: str
    roles: tuple[str, ...] = ()
    authenticator: str
    changes_sha256: str
    decided_at: datetime


class Suggestion(pydantic.BaseModel):
    """Changes an agent proposed in ``suggest`` mode, waiting for a person.

    Attributes:
        id: Its id (``sug_...``).
        agent: The agent that proposed it (its changes are attributed to it).
        object_id: The object whose change the agent reacted to.
        object_version: That object's version the agent saw.
        basis: The fields of that object the suggestion depends on (those its
            operations change, and those its reaction's ``depends_on`` names), with
            their values as the agent saw them (a field the object lacked is
            ``None``). Approving it after one of them changed is refused
            (``SuggestionStaleError``) unless forced; other fields may change. ``None``
            for a suggestion made before bases were kept: any change of its object's
            version makes it stale.
        operations: The operations to apply if approved (the same word as
            :attr:`Changes.operations`; ``changes``, its name before, is accepted
            when constructing one and readable as a deprecated property for this
            release).
        reasoning: The agent's reasoning.
        status: ``pending``, ``completed`` (approved and applied), ``rejected``,
            ``expired`` (older than its agent's ``Approval(expires_after=...)`` when
            someone tried to approve it), or ``superseded`` (a newer suggestion of its
            agent for its object took its place while it was pending).
        run_id: The recorded run that proposed it.
        created_at: When it was made (UTC).
        resolved_at: When it was approved, rejected or found expired.
        resolved_by: Who approved or rejected it (or tried to approve it, expired).
        proposer: Who made the change the agent reacted to (``Approval(
            distinct_from_proposer=True)`` refuses them as a decider).
        approvals: The approvals it has gathered while pending.
        superseded_by: The id of the newer suggestion that superseded it.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: str
    agent: str
    object_id: str | None
    object_version: int | None = None
    operations: tuple[Operation, ...] = pydantic.Field(
        validation_alias=pydantic.AliasChoices("operations", "changes")
    )
    reasoning: str
    status: SuggestionStatus = "pending"
    run_id: str | None = None
    created_at: datetime
    resolved_at: datetime | None = None
    resolved_by: Actor | None = None
    proposer: Actor | None = None
    approvals: tuple[Approved, ...] = ()
    basis: dict[str, Any] | None = None
    superseded_by: str | None = None

    @property
    def changes(self) -> tuple[Operation, ...]:
        """Deprecated: the old name of :attr:`operations` (removed in the next release)."""
        warnings.warn(
            "Suggestion.changes is now Suggestion.operations (the word Changes uses); "
            "the old name goes away in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.operations

    @property
    def approved_by(self) -> Actor | None:
        """Who approved it (``None`` unless it was approved)."""
        return self.resolved_by if self.status == "completed" else None


class ProcessingEntry(pydantic.BaseModel):
    """One object event given to one agent: a row of the processing log.

    Attributes:
        id: Its position in the log.
        agent: The agent.
        object_id: The object whose change it is.
        object_version: The object's version in that event.
        event_type: ``created``, ``updated`` or ``deleted``.
        event_id: The :class:`ObjectEvent` it is for.
        status: ``pending`` -> ``processing`` -> ``completed`` or ``failed``;
            ``skipped`` when the same (agent, object, version, event) was already
            pending, processing or completed, or when the event was caused by a
            chain of reactions deeper than ``max_reaction_depth``; ``abandoned`` when
            it was processing for longer than the service's ``stuck_after``. The
            agent's admission (``Reaction(admit=...)``) decides three more:
            ``superseded`` (a newer event of the same key took its place), ``merged``
            (delivered with the entry that took it, in its batch) and ``held`` (a spend
            cap is reached: it waits, and goes back to ``pending`` when the period rolls
            or the cap is raised).
        error: Why it failed (or was skipped, abandoned or held).
        run_id: The recorded run of the reaction.
        created_at: When the event was dispatched (UTC).
        updated_at: When the status last changed (UTC).
        attempts: How often it was taken to be processed (an entry whose process
            died is taken again, up to the service's ``max_attempts``).
        superseded_by: The entry that took this one (``superseded`` or ``merged``).
        cost_usd: What the model calls of its run cost (once it ended; ``None`` when
            a price is unknown).
    """

    model_config = pydantic.ConfigDict(frozen=True)

    id: int
    agent: str
    object_id: str
    object_version: int
    event_type: str
    event_id: int
    status: EntryStatus
    error: str | None = None
    run_id: str | None = None
    created_at: datetime
    updated_at: datetime
    attempts: int = 0
    superseded_by: int | None = None
    cost_usd: float | None = None


class Lag(pydantic.BaseModel):
    """How far behind a reaction agent is, from its entries in the processing log.

    Attributes:
        agent: The agent.
        waiting: Its ``pending`` entries: events dispatched to it, not yet taken.
        oldest: How long its oldest ``pending`` entry has waited, in seconds (``None``
            when none waits).
        outcomes: Its entries by outcome: ``admitted`` (taken to be processed:
            processing, completed, failed or abandoned), and every other status but
            ``pending`` under its own name (``skipped``, and any other the log has).
        statuses: Its entries by status, as the log has them.
        held: Its entries a spend cap holds (``held``).
        spent: What the model calls of its runs that ended this period cost, in US
            dollars (the period of its ``SpendCap``, an hour without one, aligned to the
            clock).
        period: That period, in seconds.
    """

    model_config = pydantic.ConfigDict(frozen=True)

    agent: str
    waiting: int = 0
    oldest: float | None = None
    outcomes: dict[str, int] = pydantic.Field(default_factory=lambda: {"admitted": 0})
    statuses: dict[str, int] = {}
    held: int = 0
    spent: float = 0.0
    period: float = 3600.0

    @classmethod
    def of(
        cls,
        agent: str,
        statuses: dict[str, int],
        oldest: float | None,
        spent: float = 0.0,
        period: float = 3600.0,
    ) -> Lag:
        """The lag of ``agent`` whose entries are ``statuses`` (counts by status)."""
        outcomes = {"admitted": sum(n for status, n in statuses.items() if status in ADMITTED)}
        for status, count in sorted(statuses.items()):
            if status != "pending" and status not in ADMITTED:
                outcomes[status] = count
        return cls(
            agent=agent,
            waiting=statuses.get("pending", 0),
            oldest=oldest,
            outcomes=outcomes,
            statuses=dict(sorted(statuses.items())),
            held=statuses.get("held", 0),
            spent=round(spent, 6),
            period=period,
        )
