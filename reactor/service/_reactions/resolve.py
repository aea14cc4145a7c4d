"""Approving and rejecting suggestions: a person's decision, applied as the agent's change.

Each decision is part of the audit trail: ``suggestion:approved`` or
``suggestion:rejected`` ``{suggestion_id, object_id, object_version, force, actor}``
goes into the processing log's history (in the transaction that decides) and, once it
is stored, into the process's log as an ``info`` event of that name.
"""

from __future__ import annotations

from collections.abc import Mapping

from reactor._agents.agent import Agent
from reactor._signals.diagnostics import log
from reactor._signals.names import SUGGESTION_APPROVED, SUGGESTION_REJECTED
from reactor._signals.payloads import SuggestionDecided
from reactor.exceptions import SuggestionStaleError
from reactor.service._objects.changes import Suggestion
from reactor.service._objects.history import history_row
from reactor.service._objects.objects import ObjectStore
from reactor.service._objects.suggestions import Suggestions
from reactor.service._objects.values import CURRENT_CAUSE, AgentActor, Cause, User
from reactor.service._reactions.reaction import announce, check_all

__all__ = ["approve", "reject"]


async def approve(
    objects: ObjectStore,
    suggestions: Suggestions,
    agents: Mapping[str, Agent],
    suggestion_id: str,
    who: User | AgentActor,
    *,
    force: bool = False,
) -> Suggestion:
    """Apply a pending suggestion's changes as its agent, approved by ``who``.

    The move to ``completed`` comes first (a conditional update: of two approvals,
    one wins); if the changes cannot be applied (or, unless ``force``, the object
    changed since the version the suggestion was based on), it goes back to
    ``pending``. The version is checked again in the transaction that applies the
    changes, so a change made in between is caught too; the approval's line of the
    history is written in that transaction as well (when the suggestions live in the
    objects' database; otherwise just after it).

    Raises:
        SuggestionNotFoundError: No suggestion has that id.
        SuggestionResolvedError: It was approved or rejected already.
        CapabilityError: A change is outside the agent's capabilities.
        ObjectNotFoundError: A change names an object that no longer exists.
        SuggestionStaleError: The object changed since (and ``force`` is not set).
    """
    suggestion = await suggestions.resolve(suggestion_id, "completed", who)
    decided = _decided(suggestion, who, force=force)
    together = suggestions.db is objects.db  # one database: one transaction
    try:
        agent = agents.get(suggestion.agent)
        if agent is not None:
            await check_all(
                objects, suggestion.agent, agent.capabilities, list(suggestion.operations)
            )
        expected = None
        if not force and suggestion.object_id is not None and suggestion.object_version:
            expected = {suggestion.object_id: suggestion.object_version}
        # Its changes name the suggestion (and the run that made it) as their cause: no
        # reaction's, so a reaction to them is as deep as one to a person's change.
        cause = Cause(
            run_id=suggestion.run_id or "", agent=suggestion.agent, depth=0,
            suggestion_id=suggestion.id,
        )  # fmt: skip
        caused = CURRENT_CAUSE.set(cause)
        try:
            await objects.apply(
                suggestion.operations,
                actor=AgentActor(suggestion.agent),
                approved_by=who,
                expect=expected,
                stale=lambda found: _stale(suggestion, found),
                also=(history_row(SUGGESTION_APPROVED, decided),) if together else (),
            )
        finally:
            CURRENT_CAUSE.reset(caused)
    except BaseException:
        await suggestions.resolve(suggestion_id, "pending", who, only_from="completed")
        raise
    if not together:
        await suggestions.history.add(SUGGESTION_APPROVED, decided)
    log("reactor.service", "info", SUGGESTION_APPROVED, **decided)
    announce(objects, SUGGESTION_APPROVED, suggestion, who)
    return suggestion


def _decided(suggestion: Suggestion, who: User | AgentActor, *, force: bool) -> SuggestionDecided:
    return {
        "suggestion_id": suggestion.id,
        "object_id": suggestion.object_id,
        "object_version": suggestion.object_version,
        "force": force,
        "actor": who.payload(),
    }


def _stale(suggestion: Suggestion, current: int | None) -> SuggestionStaleError:
    now = "was deleted" if current is None else f"is at version {current} now"
    return SuggestionStaleError(
        f"Suggestion {suggestion.id!r} was based on version {suggestion.object_version} of "
        f"object {suggestion.object_id!r}, which {now}: look at the object again, then "
        "approve anyway (force=True, ?force=true) or reject it.",
        suggestion_id=suggestion.id,
        object_id=suggestion.object_id or "",
        based_on=suggestion.object_version,
        current=current,
    )


async def reject(
    objects: ObjectStore, suggestions: Suggestions, suggestion_id: str, who: User | AgentActor
) -> Suggestion:
    """Mark a pending suggestion ``rejected``; nothing changes.

    Raises:
        SuggestionNotFoundError: No suggestion has that id.
        SuggestionResolvedError: It was approved or rejected already.
    """
    current = await suggestions.get(suggestion_id)
    decided = _decided(current, who, force=False)
    suggestion = await suggestions.resolve(
        suggestion_id, "rejected", who, decided=(SUGGESTION_REJECTED, decided)
    )
    log("reactor.service", "info", SUGGESTION_REJECTED, **decided)
    announce(objects, SUGGESTION_REJECTED, suggestion, who)
    return suggestion
